#include "probe/link_release.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace cptrace {

void release_together(std::vector<std::function<void()>> releases) {
  constexpr size_t kThreads = 32;  // more grace periods than this are rarely pending
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < releases.size();) releases[i]();
  };
  std::vector<std::thread> threads;
  size_t n = std::min(kThreads, releases.size());
  for (size_t t = 1; t < n; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread: the ones started and this one do the rest
    }
  }
  work();
  for (auto& t : threads) t.join();
}

void destroy_links_together(std::vector<bpf_link*> links) {
  std::vector<std::function<void()>> r;
  for (bpf_link* l : links)
    if (l) r.push_back([l] { bpf_link__destroy(l); });
  release_together(std::move(r));
}

void detach_skeleton_together(bpf_object_skeleton* s) {
  if (!s) return;
  std::vector<bpf_link*> links;
  for (int i = 0; i < s->prog_cnt; ++i) {
    // The skeleton's records are prog_skel_sz apart (libbpf may grow them).
    auto* p = reinterpret_cast<bpf_prog_skeleton*>(reinterpret_cast<char*>(s->progs) + size_t(i) * s->prog_skel_sz);
    if (p->link && *p->link) links.push_back(*p->link), *p->link = nullptr;
  }
  destroy_links_together(std::move(links));
}

}  // namespace cptrace
