// Detaching BPF programs at the stop, all at once. Each detach (a BPF link or
// the perf event under it) waits out an RCU grace period in the kernel before
// close() returns: 70-110 ms each on the VMs we run on, so the recorder's dozen
// tracepoints and uprobes cost over a second one after the other, paid by every
// `record` and by every node of a cluster run. Run together, the waits that can
// overlap do: `record -- true` stopped in 1.17-1.23 s instead of 1.57-1.62 s
// (bench/record_startup.sh). Not all can: the kernel removes the last perf event
// of a classic tracepoint, grace period included, under one mutex, so those
// detaches still queue one behind the other.
#pragma once
#include <bpf/libbpf.h>

#include <functional>
#include <vector>

namespace cptrace {

// Runs every release, each on its own thread (a bounded number at once), and
// returns when all have returned. A thread that cannot start runs its share here.
void release_together(std::vector<std::function<void()>> releases);

// bpf_link__destroy of each link, together.
void destroy_links_together(std::vector<bpf_link*> links);

// The links a skeleton's attach() made, destroyed together; their pointers are
// cleared so that the skeleton's destroy() finds none left.
void detach_skeleton_together(bpf_object_skeleton* s);

}  // namespace cptrace
