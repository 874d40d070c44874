// A program that names its channels and itself with bytes that are not UTF-8 (and
// a control character), as any program may: the recorder must record it exactly
// and show the names as text. Usage: odd_names EVENTS PACE_US
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cptrace.h"

int main(int argc, char **argv)
{
	long events = argc > 1 ? atol(argv[1]) : 1000, pace = argc > 2 ? atol(argv[2]) : 100;
	prctl(PR_SET_NAME, "odd\xff\x01name", 0, 0, 0);
	uint64_t bad = cp_open_channel("bad\xff\xfe"
				       "name"),
		 ctl = cp_open_channel("tab\there\xc3"), good = cp_open_channel("good");
	for (long i = 0; i < events; ++i) {
		cp_logTS(bad, (uint64_t)i);
		cp_logTS(ctl, (uint64_t)i);
		cp_logTS(good, (uint64_t)i);
		if (pace > 0)
			usleep((useconds_t)pace);
	}
	return 0;
}
