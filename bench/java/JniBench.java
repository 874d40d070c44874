import cp.Cloudprofiler;

/**
 * ns per event from Java, all in one JVM run: a no-call loop (the baseline), the same loop
 * calling Cloudprofiler.logTS (one JNI call into the nop5 stub, a uprobe hit when a recorder
 * is attached), and the same loop with a Cloudprofiler.Batch (System.nanoTime() into a
 * direct buffer, one hand-over per 256 events). bench/run.sh runs it without and under
 * `cptrace record`. Prints figures only.
 *
 * Usage: JniBench [--n EVENTS] [--reps R] [--only single|batch|all]
 */
public final class JniBench {
  static long sink; // results go here so the JIT cannot drop the loops

  interface Loop {
    long run(long ch, int n);
  }

  static long baseline(long ch, int n) {
    long acc = 0;
    for (int i = 0; i < n; i++) acc += ch ^ i;
    return acc;
  }

  /** What the batch form pays per event for its timestamp alone. */
  static long nanoTime(long ch, int n) {
    long acc = 0;
    for (int i = 0; i < n; i++) acc += System.nanoTime() ^ i;
    return acc;
  }

  static long single(long ch, int n) {
    long acc = 0;
    for (int i = 0; i < n; i++) {
      Cloudprofiler.logTS(ch, i);
      acc += ch ^ i;
    }
    return acc;
  }

  static final Cloudprofiler.Batch BATCH = new Cloudprofiler.Batch();

  static long batch(long ch, int n) {
    long acc = 0;
    for (int i = 0; i < n; i++) {
      BATCH.log(ch, i);
      acc += ch ^ i;
    }
    BATCH.flush();
    return acc;
  }

  /** Median ns per iteration over `reps` timed runs, after one untimed warm-up run. */
  static double nsPerEvent(Loop l, long ch, int n, int reps) {
    sink += l.run(ch, Math.min(n, 2_000_000)); // JIT warm-up
    double[] r = new double[reps];
    for (int k = 0; k < reps; k++) {
      long t0 = System.nanoTime();
      sink += l.run(ch, n);
      r[k] = (System.nanoTime() - t0) / (double) n;
    }
    java.util.Arrays.sort(r);
    return r[reps / 2];
  }

  public static void main(String[] args) {
    int n = 5_000_000, reps = 5;
    String only = "all";
    for (int a = 0; a < args.length; a++) {
      switch (args[a]) {
        case "--n": n = Integer.parseInt(args[++a]); break;
        case "--reps": reps = Integer.parseInt(args[++a]); break;
        case "--only": only = args[++a]; break;
        default: throw new IllegalArgumentException("unknown argument " + args[a]);
      }
    }
    long ch = Cloudprofiler.openChannel("bench.java");
    double base = nsPerEvent(JniBench::baseline, ch, n, reps);
    System.out.printf("  %-34s %8.2f ns/iteration (median of %d x %d)%n",
        "java no-call loop (baseline)", base, reps, n);
    if (!only.equals("batch")) {
      double s = nsPerEvent(JniBench::single, ch, n, reps);
      System.out.printf("  %-34s %8.2f ns/iteration  %8.2f ns/event over baseline%n",
          "Cloudprofiler.logTS", s, s - base);
    }
    if (!only.equals("single")) {
      double t = nsPerEvent(JniBench::nanoTime, ch, n, reps);
      System.out.printf("  %-34s %8.2f ns/iteration  %8.2f ns/event over baseline%n",
          "System.nanoTime() alone", t, t - base);
      double b = nsPerEvent(JniBench::batch, ch, n, reps);
      System.out.printf("  %-34s %8.2f ns/iteration  %8.2f ns/event over baseline%n",
          "Cloudprofiler.Batch.log", b, b - base);
    }
    Cloudprofiler.closeChannel(ch);
    if (sink == 42) System.out.println(); // keeps `sink` observable
  }
}
