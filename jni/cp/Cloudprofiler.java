package cp;

import java.io.File;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The cptrace application API for Java: name probe points ("channels") once, then log
 * events (channel, tuple id) on them.
 *
 * <pre>
 *   long ch = Cloudprofiler.openChannel("parser.in");
 *   Cloudprofiler.logTS(ch, itemId);            // one event, TSC-stamped at the call
 *   try (Cloudprofiler.Batch b = new Cloudprofiler.Batch()) {
 *     for (...) b.log(ch, itemId);              // hot loops: System.nanoTime(), handed over 256 at a time
 *   }
 *   Cloudprofiler.closeChannel(ch);
 * </pre>
 *
 * Nothing here records anything. {@link #logTS} is a native method whose machine code
 * reads the TSC, then reaches a {@code nop5; ret}: {@code cptrace record --lib
 * libcptrace_jni.so} (or {@code -p PID}) puts a uprobe on that nop5, and the recorder's
 * BPF program reads the two arguments and the TSC. With no recorder attached an event
 * costs one JNI call and a TSC read. The JVM is not modified and runs no
 * tracing code.
 *
 * <p>The native library {@code libcptrace_jni.so} is loaded when this class initializes,
 * from the first of: the system property {@code cptrace.jni.lib} (a path), the directory
 * holding the jar this class came from, {@code java.library.path}
 * ({@code System.loadLibrary("cptrace_jni")}).
 *
 * <p>Every method may be called from any thread. Channel ids are the 64-bit FNV-1a hash of
 * the name's UTF-8 bytes (0 mapped to 1), the same as {@code cp_channel_id()} in C, so a
 * channel opened from Java and one opened from C under the same name are one channel.
 */
public final class Cloudprofiler {
  /** Events per batch hand-over; the same as CP_BATCH_MAX on the native side. */
  public static final int BATCH_MAX = 256;
  /** Longest channel name kept in the recorder's table, in UTF-8 bytes. */
  public static final int CHANNEL_NAME_MAX = 63;

  private static final int ENTRY_BYTES = 24; // {long nanoTime, long channel, long tuple}

  static {
    load();
    int nativeMax = batchMax0();
    if (nativeMax != BATCH_MAX) {
      throw new UnsatisfiedLinkError(
          "libcptrace_jni.so was built with CP_BATCH_MAX " + nativeMax + ", this class expects "
              + BATCH_MAX + ": the jar and the library come from different builds");
    }
  }

  private Cloudprofiler() {}

  private static void load() {
    String explicit = System.getProperty("cptrace.jni.lib");
    if (explicit != null && !explicit.isEmpty()) {
      System.load(new File(explicit).getAbsolutePath());
      return;
    }
    File besideJar = besideJar();
    if (besideJar != null && besideJar.isFile()) {
      System.load(besideJar.getAbsolutePath());
      return;
    }
    System.loadLibrary("cptrace_jni");
  }

  /** libcptrace_jni.so in the directory of the jar (or class directory) holding this class. */
  private static File besideJar() {
    try {
      java.security.CodeSource src = Cloudprofiler.class.getProtectionDomain().getCodeSource();
      if (src == null || src.getLocation() == null) return null;
      File where = new File(src.getLocation().toURI());
      File dir = where.isDirectory() ? where : where.getParentFile();
      return dir == null ? null : new File(dir, "libcptrace_jni.so");
    } catch (URISyntaxException | SecurityException | IllegalArgumentException e) {
      return null;
    }
  }

  /**
   * Opens (names) a channel and returns its id. The name is registered in the process (so a
   * recorder attached later still learns it) and announced to a recorder already attached.
   * Opening a name again returns the same id. Names longer than {@link #CHANNEL_NAME_MAX}
   * UTF-8 bytes are truncated in the recorder's table; the id is the hash of the full name.
   *
   * @throws IllegalArgumentException if the name contains U+0000 (the native side ends
   *     names at a NUL byte, so the id would not be the hash of the whole name)
   */
  public static long openChannel(String name) {
    if (name.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("channel name contains U+0000: " + name);
    }
    return openChannel0(name.getBytes(StandardCharsets.UTF_8));
  }

  /** The id {@link #openChannel} returns for {@code name}, without opening it. */
  public static long channelId(String name) {
    long h = 0xcbf29ce484222325L; // FNV-1a 64 offset basis
    for (byte b : name.getBytes(StandardCharsets.UTF_8)) {
      h ^= (b & 0xff);
      h *= 0x100000001b3L; // FNV-1a 64 prime
    }
    return h != 0 ? h : 1;
  }

  /**
   * PROBE SITE. Logs one event, stamped with the TSC the native site reads at the call
   * (before the probe fires); the recorder records it and the calling thread's native tid.
   */
  public static native void logTS(long channel, long tupleId);

  /**
   * Reports the close of a channel to the recorder and marks it closed in the process
   * registry. Events may still be logged on the id afterwards; reopening clears the mark.
   */
  public static native void closeChannel(long channel);

  private static native long openChannel0(byte[] utf8Name);

  private static native int batchMax0();

  private static native long bufferAddress0(ByteBuffer direct);

  /** A Batch buffer, native memory from a pool that is never freed (see Batch). */
  private static native ByteBuffer newBatchBuffer0();

  /** Gives a Batch buffer back to the pool; pending events are handed over first. */
  private static native void releaseBatchBuffer0(long address);

  /**
   * Gives the buffer of a collected Batch back to the pool (the jar targets Java 8, which has
   * no java.lang.ref.Cleaner). One daemon thread, started with the first Batch.
   */
  private static final class BufferReleaser extends java.lang.ref.PhantomReference<Batch> {
    private static final java.lang.ref.ReferenceQueue<Batch> QUEUE = new java.lang.ref.ReferenceQueue<>();
    private static final java.util.Set<BufferReleaser> LIVE =
        java.util.Collections.newSetFromMap(new java.util.concurrent.ConcurrentHashMap<>());

    static {
      Thread t = new Thread(BufferReleaser::run, "cptrace-batch-release");
      t.setDaemon(true);
      t.start();
    }

    private final long address;

    BufferReleaser(Batch b, long address) {
      super(b, QUEUE);
      this.address = address;
      LIVE.add(this); // the reference itself must stay reachable until enqueued
    }

    private static void run() {
      for (;;) {
        try {
          BufferReleaser r = (BufferReleaser) QUEUE.remove();
          LIVE.remove(r);
          releaseBatchBuffer0(r.address);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
  }

  /** Hands entries [0, n) of the buffer at {@code address} to the recorder. */
  private static native void submitBatch0(long address, int n);

  /**
   * A buffer of events for one thread's hot loop: each {@link #log} stores
   * (System.nanoTime(), channel, tuple) in a direct buffer, and every {@link #BATCH_MAX}
   * events the buffer is handed to the recorder in one probe hit. The timestamps are
   * CLOCK_MONOTONIC nanoseconds (HotSpot's System.nanoTime() on Linux), which the trace
   * stores as such and converts to the node's TSC like the kernel timestamps.
   *
   * <p>Not thread-safe: use one Batch per thread. Buffered events reach the recorder when the
   * buffer fills, at {@link #flush} and at {@link #close}; for a Batch never closed, when it
   * is garbage-collected, or when the thread that last handed it over ends, or the JVM exits or
   * is killed (the recorder reads what is left as that thread dies; a Batch that never handed
   * anything over is read with the thread that made it). The buffer is native memory from a
   * pool that is never freed, so the recorder never reads memory reused for something else.
   * The thread id recorded for a batch is that of the thread handing it over.
   */
  public static final class Batch implements AutoCloseable {
    // Native byte order: the BPF program copies the entries verbatim. Zero-filled and
    // resident: the BPF program's non-faulting copy needs that.
    private final ByteBuffer buf = newBatchBuffer0().order(ByteOrder.nativeOrder());
    private final long address = bufferAddress0(buf);

    {
      new BufferReleaser(this, address);
    }

    // Where the native side and the recorder read the entry count.
    private static final int COUNT_AT = BATCH_MAX * ENTRY_BYTES;
    private int n;

    /** Buffers one event, timestamped now. */
    public void log(long channel, long tupleId) {
      int at = n * ENTRY_BYTES;
      buf.putLong(at, System.nanoTime());
      buf.putLong(at + 8, channel);
      buf.putLong(at + 16, tupleId);
      buf.putInt(COUNT_AT, ++n);
      if (n == BATCH_MAX) flush();
    }

    /** Hands the buffered events over now (no-op when empty). */
    public void flush() {
      if (n > 0) {
        submitBatch0(address, n);
        n = 0;
        buf.putInt(COUNT_AT, 0);
      }
    }

    /** Events buffered and not yet handed over. */
    public int pending() {
      return n;
    }

    /** Flushes. The batch stays usable. */
    @Override
    public void close() {
      flush();
    }
  }
}
