/* Probe sites of libcptrace.
 *
 * Every symbol here is a place the recorder attaches a uprobe to, by name. Each
 * is exactly `nop5; ret`: a uprobe whose first instruction is the 5-byte NOP
 * 0f 1f 44 00 00 is "optimized" by the kernel (a call into the uprobe
 * trampoline, ~0.3-0.4 us per hit) while any other first instruction (endbr64,
 * push, ...) costs an int3 trap plus single-step (~12 us). The arguments stay in
 * rdi/rsi/rdx, where the BPF programs read them (PT_REGS_PARM1..3).
 *
 * Written in assembly so no compiler option (-fcf-protection, -pg,
 * -fpatchable-function-entry, ...) can put anything in front of the NOP.
 *
 * Each site has exactly one name, the exported one, so that symbolizers and
 * the recorder's by-name lookup agree on what these bytes are. */

	.text

.macro CP_PROBE_SITE name
	/* 16-byte alignment: the 5 NOP bytes never straddle a page, which the
	 * kernel requires to rewrite them atomically when it optimizes the probe. */
	.p2align 4
	.globl	\name
	.type	\name, @function
\name:
	.cfi_startproc
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00	/* nopl 0x0(%rax,%rax,1) */
	ret
	.cfi_endproc
	.size	\name, . - \name
.endm

/* void cp_logTS(uint64_t channel, uint64_t tuple_id) */
	CP_PROBE_SITE cp_logTS
/* void cp_batch_submit(const struct cp_batch_entry *e, uint32_t n) */
	CP_PROBE_SITE cp_batch_submit
/* void cp_channel_announce(uint64_t id, const char *name) */
	CP_PROBE_SITE cp_channel_announce
/* void cp_channel_closed(uint64_t id) */
	CP_PROBE_SITE cp_channel_closed

	.section .note.GNU-stack, "", @progbits
