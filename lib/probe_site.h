/* The one probe-site macro of cptrace, included by the assembly of every
 * library that carries probe sites (lib/cp_stubs.S, jni/jni_stubs.S, and the
 * recorder's own sites through `.include`).
 *
 * CP_PROBE_SITE name defines an exported function that is exactly
 *
 *   stamp: mov %rdx,%r11; rdtsc; shl $32,%rdx; or %rdx,%rax; mov %r11,%rdx
 *   nop    (pad: the nop5 lands at +16)
 *   site:  nop5 (0f 1f 44 00 00)
 *   ret
 *
 * The stamp reads the TSC at the call, before the probe fires, and leaves it
 * in rax, where the BPF program reads it (PT_REGS_RC): the event's time is the
 * application's own instant, on the node's canonical timebase, with neither
 * the uprobe's entry delay nor any NTP adjustment in it. rdtsc clobbers
 * edx:eax; rdx is the third argument (cp_batch_submit's count_at, the JNI
 * site's jlong channel), so it is kept in r11 (caller-saved, never an
 * argument). rdi, rsi, rdx, rcx arrive at the probe untouched (PT_REGS_PARM1..4).
 * On the optimized path the kernel's uprobe trampoline saves rax, rcx and r11
 * and its syscall hands the saved values to the program, so rax is the stamp.
 *
 * A uprobe on the nop5 is "optimized" by x86-64 Linux 6.18+ (a call into the
 * uprobe trampoline, ~0.3-1.5 us per hit); on any other instruction it costs
 * an int3 trap plus single-step (12-30 us). The nop5 needs not be the first
 * instruction: the recorder attaches at symbol + CP_SITE_NOP_OFFSET, after
 * checking that the bytes before it are this stamp (an older site without it
 * is refused). A kernel that optimizes another nop form is served by changing
 * the nop here and in include/cptrace_probe_site.h, which holds these bytes
 * for the C/C++ side (tests/unit/test_libcptrace.cpp checks they agree).
 *
 * Bytes, not mnemonics: the recorder compares them, so no assembler may pick
 * another encoding. Written in assembly so no compiler option
 * (-fcf-protection, -pg, -fpatchable-function-entry, ...) can put anything in
 * front. Each site has exactly one name, the exported one, so that symbolizers
 * and the recorder's by-name lookup agree on what these bytes are.
 *
 * Each site's nop5 address also goes into the section cp_probe_sites, through
 * a local label (a RELATIVE relocation, never bound to another object's symbol
 * of the same name): lib/fork_safe.c repairs those sites in a forked child. */
#ifndef CPTRACE_PROBE_SITE_H
#define CPTRACE_PROBE_SITE_H

.macro CP_PROBE_SITE name
	/* 16-byte alignment of the symbol puts the nop5 at a 16-byte boundary:
	 * its 5 bytes never straddle a page, which the kernel requires to
	 * rewrite them atomically when it optimizes the probe. */
	.p2align 4
	.globl	\name
	.type	\name, @function
\name:
	.cfi_startproc
	.byte	0x49, 0x89, 0xd3		/* mov %rdx,%r11 */
	.byte	0x0f, 0x31			/* rdtsc */
	.byte	0x48, 0xc1, 0xe2, 0x20		/* shl $32,%rdx */
	.byte	0x48, 0x09, 0xd0		/* or %rdx,%rax: rax = TSC */
	.byte	0x4c, 0x89, 0xda		/* mov %r11,%rdx */
	.byte	0x90				/* nop: the nop5 at +16 */
.Lcp_site_\name:
	.if	. - \name - 16
	.error	"CP_PROBE_SITE: the nop5 must be at +16 (include/cptrace_probe_site.h)"
	.endif
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00	/* nopl 0x0(%rax,%rax,1): the probe site */
	ret
	.cfi_endproc
	.size	\name, . - \name
	.pushsection cp_probe_sites, "aw", @progbits
	.balign 8
	.quad	.Lcp_site_\name
	.popsection
.endm

#endif
