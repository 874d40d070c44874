/* Probe sites of libcptrace_jni.so: `nop5; ret`, like lib/cp_stubs.S (see there
 * why a nop5 and why assembly). `cptrace record` attaches to them by name when
 * the target ELF defines them (user/probe_attach.cpp). */

	.text

.macro CP_PROBE_SITE name
	.p2align 4	/* the 5 NOP bytes never straddle a page */
	.globl	\name
	.type	\name, @function
\name:
	.cfi_startproc
	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00	/* nopl 0x0(%rax,%rax,1) */
	ret
	.cfi_endproc
	.size	\name, . - \name
.endm

/* void Java_cp_Cloudprofiler_logTS(JNIEnv *, jclass, jlong channel, jlong tuple):
 * the native method itself, so a Java logTS() is one JNI call into these bytes. */
	CP_PROBE_SITE Java_cp_Cloudprofiler_logTS
/* void cp_batch_submit_mono(const struct cp_batch_entry *e, uint32_t n) */
	CP_PROBE_SITE cp_batch_submit_mono

	.section .note.GNU-stack, "", @progbits
