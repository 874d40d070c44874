import cp.Cloudprofiler;
import java.io.File;

/**
 * Test workload for tests/integration/test_jni.cpp: THREADS threads each log EVENTS events
 * with tuple ids thread * 1e9 + i on channel "java.chan" + (i % CHANNELS), through
 * Cloudprofiler.logTS (--mode single) or a Cloudprofiler.Batch (--mode batch; --mode
 * batch-open: a Batch never flushed nor closed, whose thread parks after logging).
 *
 * Prints "CHANNEL name id" for every channel it opened, "READY pid", then waits for
 * --wait-file (if given) to exist before logging, so a recorder can attach to the running
 * JVM; prints "DONE emitted" when the workers are done and, with --hold-file, keeps the JVM
 * and its idle worker threads alive until that file exists (so a test can look them up
 * under /proc). Closes its channels before exiting. With --end exit|halt|kill the JVM does not
 * wait for its workers but, once they are done, calls System.exit(0), Runtime.halt(0), or
 * prints "KILL ME" and waits for SIGKILL, without closing its channels. --pace-us N parks each
 * worker N us after every event (single and batch), so the events spread over time.
 */
public final class JniWorkload {
  static final long THREAD_STRIDE = 1_000_000_000L;

  public static void main(String[] args) throws Exception {
    int threads = 3, events = 1000, channels = 2;
    String mode = "single", waitFile = null, holdFile = null, end = null;
    long paceUs = 0;
    for (int a = 0; a < args.length; a++) {
      switch (args[a]) {
        case "--threads": threads = Integer.parseInt(args[++a]); break;
        case "--events": events = Integer.parseInt(args[++a]); break;
        case "--channels": channels = Integer.parseInt(args[++a]); break;
        case "--mode": mode = args[++a]; break;
        case "--wait-file": waitFile = args[++a]; break;
        case "--hold-file": holdFile = args[++a]; break;
        case "--end": end = args[++a]; break;
        case "--pace-us": paceUs = Long.parseLong(args[++a]); break;
        default: throw new IllegalArgumentException("unknown argument " + args[a]);
      }
    }
    if (!mode.equals("single") && !mode.equals("batch") && !mode.equals("batch-open"))
      throw new IllegalArgumentException("--mode must be single, batch or batch-open, not " + mode);

    long[] ch = new long[channels];
    for (int c = 0; c < channels; c++) {
      String name = "java.chan" + c;
      ch[c] = Cloudprofiler.openChannel(name);
      System.out.println("CHANNEL " + name + " " + Long.toUnsignedString(ch[c]));
    }
    System.out.println("READY " + ProcessHandle.current().pid());
    System.out.flush();
    waitFor(waitFile);

    final int n = events;
    final long paceNs = paceUs * 1000;
    final String hold = holdFile;
    final java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(threads);
    final boolean batch = mode.equals("batch"), open = mode.equals("batch-open");
    Thread[] ts = new Thread[threads];
    for (int t = 0; t < threads; t++) {
      final long base = t * THREAD_STRIDE;
      ts[t] = new Thread(() -> {
        if (open) {
          Cloudprofiler.Batch b = new Cloudprofiler.Batch();
          for (int i = 0; i < n; i++) b.log(ch[i % ch.length], base + i);
          done.countDown();
          for (;;) { // parked, the Batch still reachable
            try {
              Thread.sleep(60_000);
            } catch (InterruptedException e) {
              if (b.pending() < 0) break; // never; keeps b alive to here
            }
          }
        } else if (batch) {
          try (Cloudprofiler.Batch b = new Cloudprofiler.Batch()) {
            for (int i = 0; i < n; i++) {
              b.log(ch[i % ch.length], base + i);
              if (paceNs > 0) java.util.concurrent.locks.LockSupport.parkNanos(paceNs);
            }
          }
        } else {
          for (int i = 0; i < n; i++) {
            Cloudprofiler.logTS(ch[i % ch.length], base + i);
            if (paceNs > 0) java.util.concurrent.locks.LockSupport.parkNanos(paceNs);
          }
        }
        done.countDown();
        try {
          waitFor(hold);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }, "cp-worker-" + t);
      ts[t].start();
    }
    done.await();
    System.out.println("DONE " + (long) threads * n);
    System.out.flush();
    if ("exit".equals(end)) System.exit(0);
    if ("halt".equals(end)) Runtime.getRuntime().halt(0);
    if ("kill".equals(end)) {
      System.out.println("KILL ME");
      System.out.flush();
      for (;;) Thread.sleep(60_000);
    }
    for (Thread t : ts) t.join();
    for (long c : ch) Cloudprofiler.closeChannel(c);
  }

  static void waitFor(String path) throws InterruptedException {
    if (path == null) return;
    File f = new File(path);
    while (!f.exists()) Thread.sleep(10);
  }
}
