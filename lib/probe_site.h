/* The one probe-site macro of cptrace, included by the assembly of every
 * library that carries probe sites (lib/cp_stubs.S, jni/jni_stubs.S).
 *
 * CP_PROBE_SITE name defines an exported function that is exactly `nop5; ret`.
 * A uprobe whose first instruction is the 5-byte NOP 0f 1f 44 00 00 is
 * "optimized" by the kernel (a call into the uprobe trampoline, ~0.3-1.5 us per
 * hit) while any other first instruction (endbr64, push, ...) costs an int3
 * trap plus single-step (12-30 us). The arguments stay in rdi/rsi/rdx/rcx,
 * where the BPF programs read them (PT_REGS_PARM1..4).
 *
 * Written in assembly so no compiler option (-fcf-protection, -pg,
 * -fpatchable-function-entry, ...) can put anything in front of the NOP. Each
 * site has exactly one name, the exported one, so that symbolizers and the
 * recorder's by-name lookup agree on what these bytes are.
 *
 * Each site's address also goes into the section cp_probe_sites, through a
 * local label (a RELATIVE relocation, never bound to another object's symbol of
 * the same name): lib/fork_safe.c repairs those sites in a forked child. */
#ifndef CPTRACE_PROBE_SITE_H
#define CPTRACE_PROBE_SITE_H

.macro CP_PROBE_SITE name
	/* 16-byte alignment: the 5 NOP bytes never straddle a page, which the
	 * kernel requires to rewrite them atomically when it optimizes the probe. */
	.p2align 4
	.globl	\name
	.type	\name, @function
\name:
.Lcp_site_\name:
	.cfi_startproc
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00	/* nopl 0x0(%rax,%rax,1) */
	ret
	.cfi_endproc
	.size	\name, . - \name
	.pushsection cp_probe_sites, "aw", @progbits
	.balign 8
	.quad	.Lcp_site_\name
	.popsection
.endm

#endif
