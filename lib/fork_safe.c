/* Fork safety of the probe sites.
 *
 * On kernels with optimized uprobes (Linux 6.18+), the first hit of a uprobe on
 * a nop5 site rewrites the site, in that process only, into a `call` to the
 * process's [uprobes-trampoline] page. fork() copies the rewritten code page
 * but not the trampoline mapping, so a child that reaches the site calls into
 * nothing and dies of SIGSEGV.
 *
 * Repair, in the child, before fork() returns (a pthread_atfork child handler):
 * every page holding a site in the call form is mapped again from its file, at
 * the same address and offset. The kernel installs the breakpoints of the
 * uprobes registered at that moment into a new mapping (uprobe_mmap), under the
 * same locks that order it with a recorder attaching or detaching. So the
 * child's sites end up exactly as if the library had just been loaded: a nop5
 * when no uprobe covers this child, an int3 (optimized again at its first hit)
 * when one does. Writing the sites back by hand could not be ordered with a
 * detaching recorder: an int3 written after its breakpoints were removed stays
 * behind and kills the child with SIGTRAP.
 *
 * Where the file cannot be mapped again (deleted or replaced since it was
 * loaded), the call-form sites are overwritten with the nop5 through
 * /proc/self/mem instead: the child then runs untraced at those sites but
 * safely, whatever a recorder does meanwhile.
 *
 * Not covered: a child made by a raw clone()/syscall(SYS_fork) that bypasses
 * glibc's fork() (no atfork handler runs there). fork(), vfork(), posix_spawn()
 * and system() are covered (the last two exec or share the memory). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cp_internal.h"
#include "cptrace_probe_site.h"

/* Filled by the linker from every CP_PROBE_SITE of this object (lib/probe_site.h):
 * the address of each site's nop, where the uprobe goes. */
extern const uintptr_t __start_cp_probe_sites[] __attribute__((visibility("hidden")));
extern const uintptr_t __stop_cp_probe_sites[] __attribute__((visibility("hidden")));

#define CP_FORK_PAGES 8
#define CP_FORK_PATH 4096

/* One code page holding probe sites, and where it was mapped from. Read in the
 * child with nothing but system calls (async-signal-safe after fork). */
struct site_page {
	uintptr_t addr;
	uint64_t offset; /* file offset of addr */
	int prot;
	dev_t dev;
	ino_t ino;
	char path[CP_FORK_PATH];
};

static struct site_page pages[CP_FORK_PAGES];
static int n_pages;
static uintptr_t page_size;

static int site_is_call(uintptr_t site)
{
	return *(const volatile uint8_t *)site == 0xe8;
}

static int page_has_call_site(uintptr_t page)
{
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++)
		if ((*s & ~(page_size - 1)) == page && site_is_call(*s))
			return 1;
	return 0;
}

static int remap_from_file(const struct site_page *p)
{
	int fd = open(p->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	int ok = fstat(fd, &st) == 0 && st.st_dev == p->dev && st.st_ino == p->ino &&
		 mmap((void *)p->addr, page_size, p->prot, MAP_PRIVATE | MAP_FIXED, fd, (off_t)p->offset) !=
			 MAP_FAILED;
	close(fd);
	return ok ? 0 : -1;
}

/* The fallback: the nop (include/cptrace_probe_site.h) over every call-form
 * site of the page. */
static void write_nop5(uintptr_t page)
{
	static const uint8_t nop5[CP_SITE_NOP_LEN] = {CP_SITE_NOP_BYTES};
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++)
		if ((*s & ~(page_size - 1)) == page && site_is_call(*s))
			(void)!pwrite(fd, nop5, sizeof(nop5), (off_t)*s);
	close(fd);
}

/* Then a child of a followed process waits for its recorder (follow_wait.c). */
CP_HIDDEN void cp_fork_repair_child(void)
{
	for (int i = 0; i < n_pages; i++) {
		const struct site_page *p = &pages[i];
		if (!page_has_call_site(p->addr))
			continue;
		if (remap_from_file(p) != 0 || page_has_call_site(p->addr))
			write_nop5(p->addr);
	}
	if (!cp_hello_recorder() && cp_follow_expected())
		cp_follow_wait();
}

/* The /proc/self/maps line of the mapping holding `addr`, parsed into `p`. */
static int describe_page(uintptr_t addr, struct site_page *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	char line[CP_FORK_PATH + 128];
	int found = -1;
	while (found && fgets(line, sizeof(line), f)) {
		unsigned long start, end, off, ino;
		unsigned maj, min;
		char perms[5];
		int path_at = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min, &ino,
			   &path_at) < 7 ||
		    addr < start || addr >= end || !path_at || line[path_at] != '/')
			continue;
		size_t len = strcspn(line + path_at, "\n");
		if (len >= sizeof(p->path))
			break;
		memcpy(p->path, line + path_at, len);
		p->path[len] = '\0';
		p->addr = addr;
		p->offset = off + (addr - start);
		p->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			  (perms[2] == 'x' ? PROT_EXEC : 0);
		p->dev = makedev(maj, min);
		p->ino = ino;
		found = 0;
	}
	fclose(f);
	return found;
}

static int page_known(uintptr_t page)
{
	for (int i = 0; i < n_pages; i++)
		if (pages[i].addr == page)
			return 1;
	return 0;
}

/* Run from .init_array (lib/cp_stubs.S says why), before the program can fork.
 * A page that cannot be described (no file, too many pages) still gets the
 * nop5 fallback: it is listed with an empty path, which never opens. */
CP_HIDDEN void cp_fork_safe_init(void)
{
	page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++) {
		uintptr_t page = *s & ~(page_size - 1);
		if (page_known(page) || n_pages == CP_FORK_PAGES)
			continue;
		struct site_page *p = &pages[n_pages++];
		if (describe_page(page, p) != 0) {
			memset(p, 0, sizeof(*p));
			p->addr = page;
		}
	}
	pthread_atfork(NULL, NULL, cp_fork_repair_child);
	/* A recorder that must record us, in any namespace (recorder_hello.c); or,
	 * started by a followed process without fork() (posix_spawn, vfork+exec),
	 * its follow mark. */
	if (!cp_hello_recorder() && cp_follow_expected())
		cp_follow_wait();
}
