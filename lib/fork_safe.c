/* Fork safety of the probe sites.
 *
 * On kernels with optimized uprobes (Linux 6.18+), the first hit of a uprobe on
 * a nop5 site rewrites the site, in that process only, into a `call` to the
 * process's [uprobes-trampoline] page. fork() copies the rewritten code page
 * but not the trampoline mapping (VM_DONTCOPY), so a child that reaches the
 * site calls into nothing and dies of SIGSEGV.
 *
 * Worse, the kernel goes on patching the child's copy one byte at a time, as
 * if it were a plain site: a recorder that attaches to the child (a followed
 * fork, a second recorder) writes its int3 over the call's first byte only,
 * because the child holds no trampoline and so the call is not "optimized" in
 * the kernel's eyes; a detach then puts back the nop's first byte only. From
 * `e8 4b cd ff ff` the child gets `cc 4b cd ff ff`, then `0f 4b cd ff ff`:
 * cmovnp, then `ff ff`, an undefined opcode (SIGILL). The recorder of a
 * followed child attaches within a millisecond of the fork, often before the
 * child first runs, so these bytes are what the repair below finds.
 *
 * Repair, in the child, before fork() returns (a pthread_atfork child handler):
 * every page holding a site whose bytes are not exactly the nop5 the file holds
 * (a call, an int3, or any of the mixes above) is mapped again from its file,
 * at the same address and offset. The kernel installs the breakpoints of the
 * uprobes registered at that moment into a new mapping (uprobe_mmap), under the
 * same locks that order it with a recorder attaching or detaching. So the
 * child's sites end up exactly as if the library had just been loaded: a nop5
 * when no uprobe covers this child, an int3 (optimized again at its first hit)
 * when one does. From a nop5 or such an int3 the kernel only ever moves a site
 * between those two and a call into the child's own trampoline, all of which
 * it undoes correctly. Writing the sites back by hand could not be ordered
 * with a detaching recorder: an int3 written after its breakpoints were
 * removed stays behind and kills the child with SIGTRAP.
 *
 * Where the file cannot be mapped again (deleted or replaced since it was
 * loaded), the sites that are not the nop5 are overwritten with it through
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

static const uint8_t nop5[CP_SITE_NOP_LEN] = {CP_SITE_NOP_BYTES};

/* Whether the site holds anything but the file's nop5: a call, an int3, or a
 * mix left by the kernel's byte-wise patching of a copied call. Any of them
 * gets the page mapped again. Read byte by byte: a recorder may change one byte
 * meanwhile, and only a read of exactly the nop5 skips the repair. */
static int site_patched(uintptr_t site)
{
	const volatile uint8_t *b = (const volatile uint8_t *)site;
	for (int i = 0; i < CP_SITE_NOP_LEN; i++)
		if (b[i] != nop5[i])
			return 1;
	return 0;
}

static int page_has_patched_site(uintptr_t page)
{
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++)
		if ((*s & ~(page_size - 1)) == page && site_patched(*s))
			return 1;
	return 0;
}

/* After the page came back from its file: a site may be the nop5 or the int3
 * the kernel installed over it (a uprobe covers this child), nothing else. */
static int site_fresh(uintptr_t site)
{
	const volatile uint8_t *b = (const volatile uint8_t *)site;
	if (b[0] != nop5[0] && b[0] != 0xcc)
		return 0;
	for (int i = 1; i < CP_SITE_NOP_LEN; i++)
		if (b[i] != nop5[i])
			return 0;
	return 1;
}

static int page_fresh(uintptr_t page)
{
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++)
		if ((*s & ~(page_size - 1)) == page && !site_fresh(*s))
			return 0;
	return 1;
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

/* The fallback: the nop (include/cptrace_probe_site.h) over every site of the
 * page that is not the nop. */
static void write_nop5(uintptr_t page)
{
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	for (const uintptr_t *s = __start_cp_probe_sites; s < __stop_cp_probe_sites; s++)
		if ((*s & ~(page_size - 1)) == page && site_patched(*s))
			(void)!pwrite(fd, nop5, sizeof(nop5), (off_t)*s);
	close(fd);
}

/* Then a child of a followed process waits for its recorder (follow_wait.c). */
CP_HIDDEN void cp_fork_repair_child(void)
{
	for (int i = 0; i < n_pages; i++) {
		const struct site_page *p = &pages[i];
		if (!page_has_patched_site(p->addr))
			continue;
		if (remap_from_file(p) != 0 || !page_fresh(p->addr))
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
