/* The bytes of every probe site of cptrace, for the C and C++ code that checks
 * or repairs them (the recorder refuses a site that differs; lib/fork_safe.c
 * writes the nop back). The sites themselves are made by the assembler macro
 * CP_PROBE_SITE in lib/probe_site.h, which emits these very bytes;
 * tests/unit/test_libcptrace.cpp checks that the two agree.
 *
 * A site is: the stamp (the TSC into rax, every argument register kept), the
 * nop the uprobe goes on, at CP_SITE_NOP_OFFSET from the symbol, then `ret`. */
#ifndef CPTRACE_PROBE_SITE_H_BYTES
#define CPTRACE_PROBE_SITE_H_BYTES

/* mov %rdx,%r11; rdtsc; shl $32,%rdx; or %rdx,%rax; mov %r11,%rdx; nop
 * (the last nop pads the nop5 to CP_SITE_NOP_OFFSET: see lib/probe_site.h). */
#define CP_SITE_STAMP_BYTES                                                                                  \
	0x49, 0x89, 0xd3, 0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, 0x4c, 0x89, 0xda, 0x90
#define CP_SITE_NOP_OFFSET 16
/* The nop form this kernel generation optimizes (x86-64 Linux 6.18+). */
#define CP_SITE_NOP_BYTES 0x0f, 0x1f, 0x44, 0x00, 0x00
#define CP_SITE_NOP_NAME "nop5"
#define CP_SITE_NOP_LEN 5
#define CP_SITE_RET 0xc3

#endif
