/* JNI side of cp.Cloudprofiler (jni/cp/Cloudprofiler.java).
 *
 * The natives are found by the JVM through the standard name mangling
 * (Java_cp_Cloudprofiler_<method>), looked up with dlsym at the first call: no
 * JNI_OnLoad/RegisterNatives, so the entry point of logTS is the exported
 * symbol itself and `cptrace record` can find it by name in the ELF file.
 *
 * Java_cp_Cloudprofiler_logTS is not here: it is a probe site (a TSC read,
 * then `nop5; ret`: jni/jni_stubs.S). Everything else reuses libcptrace (lib/), which is linked
 * into libcptrace_jni.so: channel announce and registry (so `-p PID` late
 * attach resolves names), close. */
#include <jni.h>
#include <pthread.h>
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

/* ---- Buffers of Cloudprofiler.Batch --------------------------------------
 * Native memory, never freed: the recorder reads a buffer's count and entries
 * when the thread that last handed it over dies (bpf/cptrace.bpf.c), which can
 * be after the Batch became garbage. When the Batch is collected (its Cleaner
 * calls releaseBatchBuffer0), the buffer is forgotten by the recorder and kept
 * in a pool for the next Batch: memory stays bounded by the Batches alive at
 * once, and no buffer the recorder may still read is ever reused by malloc. */
struct jbuf {
	struct cp_batch_entry e[CP_BATCH_MAX];
	uint32_t n; /* written by Java (Batch.COUNT_AT) */
	uint32_t pad;
	struct jbuf *next; /* in the pool */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct jbuf *pool;

/* A Batch's buffer: entries, then the u32 count at BATCH_MAX * 24. */
JNIEXPORT jobject JNICALL Java_cp_Cloudprofiler_newBatchBuffer0(JNIEnv *env, jclass cls)
{
	(void)cls;
	pthread_mutex_lock(&pool_mu);
	struct jbuf *b = pool;
	if (b)
		pool = b->next;
	pthread_mutex_unlock(&pool_mu);
	if (!b && posix_memalign((void **)&b, 64, sizeof(*b))) {
		jclass oom = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
		if (oom)
			(*env)->ThrowNew(env, oom, "cptrace: a Batch buffer");
		return NULL;
	}
	memset(b, 0, sizeof(*b));	      /* resident, for the recorder's non-faulting reads */
	cp_batch_submit_mono(b->e, 0, &b->n); /* named for the exit path */
	return (*env)->NewDirectByteBuffer(env, b, (jlong)(sizeof(b->e) + sizeof(b->n)));
}

/* The Batch is unreachable: nothing writes the buffer any more. Pending events
 * of a Batch never closed nor flushed go to the recorder now. */
JNIEXPORT void JNICALL Java_cp_Cloudprofiler_releaseBatchBuffer0(JNIEnv *env, jclass cls, jlong address)
{
	(void)env, (void)cls;
	struct jbuf *b = (struct jbuf *)(uintptr_t)address;
	if (!b)
		return;
	if (b->n && b->n <= CP_BATCH_MAX)
		cp_batch_submit_mono(b->e, b->n, NULL);
	b->n = 0;
	cp_batch_submit_mono(b->e, 0, NULL); /* forgotten, by address */
	pthread_mutex_lock(&pool_mu);
	b->next = pool;
	pool = b;
	pthread_mutex_unlock(&pool_mu);
}

/* The entries are {nanoTime, channel, tuple} in native byte order, i.e. struct
 * cp_batch_entry with a CLOCK_MONOTONIC ns timestamp in place of the TSC. The
 * buffer is one of newBatchBuffer0's; its count follows the entries. */
JNIEXPORT void JNICALL Java_cp_Cloudprofiler_submitBatch0(JNIEnv *env, jclass cls, jlong address, jint n)
{
	(void)env, (void)cls;
	if (n < 1 || n > CP_BATCH_MAX || !address)
		return; /* Batch never passes these; nothing sensible to hand over */
	const struct cp_batch_entry *e = (const struct cp_batch_entry *)(uintptr_t)address;
	cp_batch_submit_mono(e, (uint32_t)n, (const uint32_t *)(e + CP_BATCH_MAX));
}
