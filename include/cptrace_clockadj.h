/* Record of one clock-adjusting system call, written by bpf/clockadj.bpf.c and
 * read by the recorder (user/probe/clock_adjust_watch.h): adjtimex, clock_adjtime,
 * clock_settime and settimeofday, stamped at entry and exit with the kernel's
 * CLOCK_MONOTONIC (bpf_ktime_get_ns), with what the caller asked for. */
#pragma once
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum cp_clockadj_syscall {
	CP_CLKADJ_ADJTIMEX = 1,
	CP_CLKADJ_CLOCK_ADJTIME = 2,
	CP_CLKADJ_CLOCK_SETTIME = 3,
	CP_CLKADJ_SETTIMEOFDAY = 4,
};

/* Counters of the clockadj program (one array, index below). */
enum cp_clockadj_counter {
	CP_CLKADJ_CNT_SEEN = 0,	   /* calls completed (exit seen with its entry) */
	CP_CLKADJ_CNT_DROPPED = 1, /* of those, not written: ring full */
	CP_CLKADJ_CNT_N = 2,
};

struct cp_clockadj_rec {
	__u64 enter_ns; /* CLOCK_MONOTONIC at sys_enter */
	__u64 exit_ns;	/* CLOCK_MONOTONIC at sys_exit: the change is made in between */
	__s64 ret;	/* the syscall's return value (adjtimex: TIME_* state, < 0: -errno) */
	__u32 tgid;
	__u32 tid;
	__u32 syscall; /* enum cp_clockadj_syscall */
	__s32 clockid; /* clock_adjtime / clock_settime; -1 for the others */
	__u32 modes;   /* struct timex modes (ADJ_*); 0 for settime / settimeofday */
	__s32 status;  /* timex status as passed */
	__s64 offset;  /* timex offset, freq, tick, constant as passed (meaningful per modes) */
	__s64 freq;
	__s64 tick;
	__s64 constant;
	__s64 set_sec; /* clock_settime / settimeofday: the time set (settimeofday: usec * 1000) */
	__s64 set_nsec;
	__u32 read_ok; /* 1: the user argument was read at entry (0: its values above are 0) */
	__u32 pad;
	char comm[16];
};
