/* Probe sites of libcptrace_jni.so: a TSC stamp, then `nop5; ret`, like
 * lib/cp_stubs.S (see lib/probe_site.h why a stamp, why a nop5, why assembly). `cptrace record` attaches to
 * them by name when the target ELF defines them (user/probe/probe_attach.cpp). */
#include "probe_site.h"

	.text

/* void Java_cp_Cloudprofiler_logTS(JNIEnv *, jclass, jlong channel, jlong tuple):
 * the native method itself, so a Java logTS() is one JNI call into these bytes. */
	CP_PROBE_SITE Java_cp_Cloudprofiler_logTS
/* void cp_batch_submit_mono(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at) */
	CP_PROBE_SITE cp_batch_submit_mono

	.section .note.GNU-stack, "", @progbits
