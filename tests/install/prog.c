/* Built against an installed cptrace by tests/integration/test_install.cpp, once
 * through pkg-config and once through CMake's find_package(cptrace): logs tuples
 * 0 .. N-1 (N = argv[1], default 1000) on the channel "install.sample". */
#include <cptrace.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000;
	uint64_t ch = cp_open_channel("install.sample");
	for (uint64_t id = 0; id < n; id++)
		cp_logTS(ch, id);
	cp_close_channel(ch);
	return 0;
}
