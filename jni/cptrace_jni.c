/* JNI side of cp.Cloudprofiler (jni/cp/Cloudprofiler.java).
 *
 * The natives are found by the JVM through the standard name mangling
 * (Java_cp_Cloudprofiler_<method>), looked up with dlsym at the first call: no
 * JNI_OnLoad/RegisterNatives, so the entry point of logTS is the exported
 * symbol itself and `cptrace record` can find it by name in the ELF file.
 *
 * Java_cp_Cloudprofiler_logTS is not here: it is the probe site `nop5; ret`
 * (jni/jni_stubs.S). Everything else reuses libcptrace (lib/), which is linked
 * into libcptrace_jni.so: channel announce and registry (so `-p PID` late
 * attach resolves names), close. */
#include <jni.h>
#include <stdlib.h>
#include <string.h>

#include "cptrace.h"
#include "cptrace_records.h"
#include "jni_stubs.h"

JNIEXPORT jlong JNICALL Java_cp_Cloudprofiler_openChannel0(JNIEnv *env, jclass cls, jbyteArray utf8)
{
	(void)cls;
	jsize len = (*env)->GetArrayLength(env, utf8);
	/* The id is the hash of the whole name, so the whole name is copied, NUL
	 * appended (Java checked there is none inside). */
	char small[CP_CHANNEL_NAME_MAX];
	char *name = (size_t)len < sizeof(small) ? small : malloc((size_t)len + 1);
	if (!name) {
		jclass oom = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
		if (oom)
			(*env)->ThrowNew(env, oom, "cptrace: copying a channel name");
		return 0;
	}
	(*env)->GetByteArrayRegion(env, utf8, 0, len, (jbyte *)name);
	name[len] = '\0';
	uint64_t id = cp_open_channel(name);
	if (name != small)
		free(name);
	return (jlong)id;
}

JNIEXPORT void JNICALL Java_cp_Cloudprofiler_closeChannel(JNIEnv *env, jclass cls, jlong channel)
{
	(void)env, (void)cls;
	cp_close_channel((uint64_t)channel);
}

JNIEXPORT jint JNICALL Java_cp_Cloudprofiler_batchMax0(JNIEnv *env, jclass cls)
{
	(void)env, (void)cls;
	return CP_BATCH_MAX;
}

JNIEXPORT jlong JNICALL Java_cp_Cloudprofiler_bufferAddress0(JNIEnv *env, jclass cls, jobject buf)
{
	(void)cls;
	return (jlong)(uintptr_t)(*env)->GetDirectBufferAddress(env, buf);
}

/* The entries are {nanoTime, channel, tuple} in native byte order, i.e. struct
 * cp_batch_entry with a CLOCK_MONOTONIC ns timestamp in place of the TSC. The
 * buffer belongs to a Cloudprofiler.Batch (address from bufferAddress0), which
 * is reachable for the duration of this call. */
JNIEXPORT void JNICALL Java_cp_Cloudprofiler_submitBatch0(JNIEnv *env, jclass cls, jlong address,
							  jint n)
{
	(void)env, (void)cls;
	if (n < 1 || n > CP_BATCH_MAX || !address)
		return; /* Batch never passes these; nothing sensible to hand over */
	cp_batch_submit_mono((const struct cp_batch_entry *)(uintptr_t)address, (uint32_t)n, NULL);
}
