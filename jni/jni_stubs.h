/* Probe sites of libcptrace_jni.so (jni/jni_stubs.S), beside those of libcptrace. */
#ifndef CPTRACE_JNI_STUBS_H
#define CPTRACE_JNI_STUBS_H

#include <jni.h>
#include <stdint.h>

struct cp_batch_entry;

/* PROBE SITE. cp.Cloudprofiler.logTS(long, long): the JVM calls it with
 * (JNIEnv *, jclass, jlong channel, jlong tuple), so the recorder reads the
 * third and fourth arguments (rdx, rcx). */
JNIEXPORT void JNICALL Java_cp_Cloudprofiler_logTS(JNIEnv *env, jclass cls, jlong channel, jlong tuple);

/* PROBE SITE. Like cp_batch_submit, but the entries' timestamps are
 * CLOCK_MONOTONIC ns (Java's System.nanoTime()), not TSC ticks. */
void cp_batch_submit_mono(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at);

#endif
