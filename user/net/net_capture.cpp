#include "net/net_capture.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "trace/net_codec.h"
#include "netcap.skel.h"
#include "probe/per_cpu_rings.h"
#include "os/cgroup_dirs.h"
#include "probe/kernel_features.h"
#include "probe/link_release.h"
#include "probe/probe_attach.h"

namespace cptrace {

namespace {

// Records per Net frame: ~768 KiB raw, well below the frame limits, and small
// enough that a frame is ready every flush period at moderate rates.
constexpr size_t kFrameRecords = 8192;

uint32_t netns_inode(const std::string& spec) {
  std::string path = spec == "self" ? "/proc/self/ns/net" : spec;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("--netns {}: {}", spec, strerror(errno)));
  int type = ioctl(fd, NS_GET_NSTYPE);
  struct stat st {};
  int rc = fstat(fd, &st);
  close(fd);
  if (type != CLONE_NEWNET || rc != 0)
    throw std::runtime_error(
        fmt::format("--netns {}: not a network namespace (give /run/netns/NAME, /proc/PID/ns/net or self)", spec));
  return uint32_t(st.st_ino);
}

}  // namespace

NetFilters resolve_net_filters(const NetOptions& opt) {
  NetFilters f;
  if (!opt.netns.empty()) f.netns = netns_inode(opt.netns);
  if (!opt.cgroup.empty()) f.cgroup = cgroup_dir_id(opt.cgroup, "--cgroup");
  return f;
}

NetCapture::NetCapture(const NetOptions& opt) : opt_(opt), filt_(resolve_net_filters(opt)) {
  if (opt.ports.size() > 64) throw std::runtime_error("--port: at most 64 ports");
  PendingRings rings(opt.ring_bytes, "cp_net_ring", "a network ring buffer");  // made while the programs load
  skel_ = netcap_bpf::open();
  if (!skel_) throw std::runtime_error(explain_bpf_error(errno, "opening the network BPF object"));
  skel_->rodata->filter_netns = filt_.netns;
  skel_->rodata->filter_cgroup = filt_.cgroup;
  skel_->rodata->filter_tgid = opt.pid;
  skel_->rodata->filter_tree = opt.followed_map_fd >= 0;
  if (opt.followed_map_fd >= 0 && bpf_map__reuse_fd(skel_->maps.followed, opt.followed_map_fd) != 0)
    throw std::runtime_error(explain_bpf_error(errno, "sharing the followed process set with the network capture"));
  skel_->rodata->filter_ports = !opt.ports.empty();
  skel_->rodata->wakeup_bytes = opt.ring_bytes / 4;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error(explain_bpf_error(ncpu, "counting CPUs"));
  bpf_map__set_max_entries(skel_->maps.net_rings, ncpu);
  skip_missing_tracepoints();
  {
    BpfLoadLog log;
    if (int err = netcap_bpf::load(skel_))
      throw std::runtime_error(explain_load_failure(
          err, log.text(), "loading the network BPF programs (needs BTF and the net/sock tracepoints)"));
  }
  for (uint16_t p : opt.ports) {
    uint8_t one = 1;
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.ports), &p, &one, BPF_ANY))
      throw std::runtime_error(explain_bpf_error(errno, "setting the --port filter"));
  }
  ring_fds_ = rings.install(bpf_map__fd(skel_->maps.net_rings));
  read_rings();
  pending_.reserve(kFrameRecords);
}

NetCapture::~NetCapture() {
  if (thread_.joinable()) stop();
  destroy_links_together(std::move(links_));  // link_release.h: one grace period for all
  links_.clear();
  ring_buffer__free(rb_);
  for (int fd : ring_fds_) close(fd);
  if (skel_) detach_skeleton_together(skel_->skeleton);
  netcap_bpf::destroy(skel_);
}

void NetCapture::read_rings() {
  for (int fd : ring_fds_) {
    int err = rb_ ? ring_buffer__add(rb_, fd, &NetCapture::on_record, this) : 0;
    if (!rb_) {
      rb_ = ring_buffer__new(fd, &NetCapture::on_record, this, nullptr);
      err = rb_ ? 0 : -errno;
    }
    if (err) throw std::runtime_error(explain_bpf_error(err, "reading a network ring buffer"));
  }
  waiter_ = std::make_unique<RingWaiter>(rb_, "the network capture");
}

// The receive entry points whose stamp a receive record takes over (bpf/netcap.bpf.c),
// with their programs. All or none: an skb whose early entry was never taken (dropped,
// merged by GRO) is recycled, and reaching netif_receive_skb through a path without
// its entry point it would take that stale, too early, stamp.
static const std::pair<const char*, const char*> kRxEarly[] = {
    {"netif_rx", "cp_rx_netif_rx"},
    {"netif_receive_skb_entry", "cp_rx_receive_entry"},
    {"netif_receive_skb_list_entry", "cp_rx_list_entry"},
    {"napi_gro_receive_entry", "cp_rx_gro_entry"},
    {"napi_gro_frags_entry", "cp_rx_frags_entry"},
};

static bool is_rx_early(const std::string& tp) {
  for (auto& [t, prog] : kRxEarly)
    if (tp == t) return true;
  return false;
}

// What each optional tracepoint brings; the packet ones (net_dev_start_xmit,
// netif_receive_skb) and the softirq bracket exist on every supported kernel.
static const char* what_is_lost(const std::string& tp) {
  if (tp == "sock_send_length" || tp == "sock_recv_length")
    return "socket send/receive events are not recorded (Linux 6.3+); packets are";
  if (tp == "tcp_sendmsg_locked") return "the first segment of a TCP flow may have no pid (Linux 6.13+ attributes it)";
  return "its events are not recorded";
}

// A program whose tracepoint this kernel lacks is not loaded; said once, in
// missing(), instead of failing the whole capture. The receive entry points go
// together (kRxEarly).
void NetCapture::skip_missing_tracepoints() {
  std::vector<std::string> early_missing;
  for (auto& [tp, prog] : kRxEarly)
    if (!kernel_has_tracepoint(tp)) early_missing.push_back(tp);
  bpf_program* p;
  bpf_object__for_each_program(p, skel_->obj) {
    std::string sec = bpf_program__section_name(p);
    if (sec.rfind("tp_btf/", 0) != 0) continue;
    std::string tp = sec.substr(7);
    if (is_rx_early(tp)) {
      if (early_missing.empty())
        rx_stamp_.push_back(tp);
      else
        bpf_program__set_autoload(p, false);
      continue;
    }
    // The start of a send call: asked for, and for the socket send event alone.
    if (tp == "sys_enter") {
      if (opt_.send_calls && kernel_has_tracepoint("sock_send_length")) continue;
      bpf_program__set_autoload(p, false);
      if (opt_.send_calls) missing_.push_back("no sock_send_length tracepoint: --net-send-calls stamps nothing");
      continue;
    }
    if (kernel_has_tracepoint(tp)) continue;
    bpf_program__set_autoload(p, false);
    missing_.push_back(fmt::format("no {} tracepoint: {}", tp, what_is_lost(tp)));
  }
  if (!early_missing.empty())
    missing_.push_back(
        fmt::format("no {} tracepoint: received packets are stamped at netif_receive_skb, after the backlog queue "
                    "and GRO (later than the earliest receive point, so traffic bounds are wider)",
                    fmt::join(early_missing, ", ")));
  rx_stamp_.push_back("netif_receive_skb");  // every receive without an early stamp
}

void NetCapture::start(BlockPipeline& pipe) {
  pipe_ = &pipe;
  // The softirq bracket first (the packet programs rely on it to tell process
  // context), exit before entry: a softirq caught between the two attachments then
  // shows an exit without entry (clamped at 0), never an entry without exit, which
  // would leave its CPU marked "in softirq" for the whole recording.
  // The receive record before the early receive stamps it takes over: no stamp
  // is left behind in the map by a packet that passed an entry point first.
  bpf_program* progs[] = {
      skel_->progs.cp_softirq_exit,  skel_->progs.cp_softirq_entry, skel_->progs.cp_net_tx,
      skel_->progs.cp_net_rx,        skel_->progs.cp_rx_netif_rx,   skel_->progs.cp_rx_receive_entry,
      skel_->progs.cp_rx_list_entry, skel_->progs.cp_rx_gro_entry,  skel_->progs.cp_rx_frags_entry,
      skel_->progs.cp_sys_enter,     skel_->progs.cp_sock_send,     skel_->progs.cp_sock_recv,
      skel_->progs.cp_tcp_sendmsg,   skel_->progs.cp_sock_state};
  for (bpf_program* p : progs) {
    if (!bpf_program__autoload(p)) continue;  // not on this kernel (missing())
    bpf_link* l = bpf_program__attach(p);
    if (!l) throw std::runtime_error(explain_bpf_error(errno, std::string("attaching ") + bpf_program__name(p)));
    links_.push_back(l);
  }
  thread_ = std::thread([this] { loop(); });
}

int NetCapture::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<NetCapture*>(ctx);
  if (size != sizeof(cp_net_rec)) {  // cannot happen with our programs; counted anyway
    self->malformed_++;
    return 0;
  }
  self->pending_.push_back(*static_cast<const cp_net_rec*>(data));
  if (self->pending_.size() >= kFrameRecords) self->flush();
  return 0;
}

void NetCapture::flush() {
  if (pending_.empty()) return;
  pipe_->submit_frame(encode_net(pending_.data(), pending_.size(), opt_.zstd_level));
  recorded_ += pending_.size();
  pending_.clear();
}

void NetCapture::loop() {
  // Asleep until a ring passes its wakeup threshold or the recorder asks for
  // its periodic flush or the stop (the timeout only bounds a missed wakeup).
  while (!stop_.load()) {
    waiter_->wait(1000);
    ring_buffer__consume(rb_);
    if (flush_requested_.exchange(false)) flush();
  }
  // Programs are detached by now: what is left in the rings is final.
  while (ring_buffer__consume(rb_) > 0) {
  }
  flush();
}

void NetCapture::stop() {
  destroy_links_together(std::move(links_));  // link_release.h: one grace period for all
  links_.clear();
  stop_.store(true);
  waiter_->wake();
  if (thread_.joinable()) thread_.join();
}

Counters NetCapture::read_counters() const {
  int fd = bpf_map__fd(skel_->maps.net_counters);
  Counters c;
  c.seen = read_per_cpu_counter(fd, CP_NET_CNT_SEEN);
  c.dropped = read_per_cpu_counter(fd, CP_NET_CNT_DROPPED);
  return c;
}

nlohmann::json NetCapture::counters_json() const {
  Counters c = read_counters();
  return {{"seen", c.seen}, {"dropped", c.dropped}, {"malformed", malformed_.load()}};
}

nlohmann::json NetCapture::describe() const {
  return {{"netns", opt_.netns},
          {"netns_inode", filt_.netns},
          {"cgroup", opt_.cgroup},
          {"cgroup_id", filt_.cgroup},
          {"pid", opt_.pid},
          {"pid_and_children", opt_.followed_map_fd >= 0},
          {"ports", opt_.ports},
          {"send_calls", opt_.send_calls},
          {"tx_stamp", "net_dev_start_xmit"},
          {"rx_stamp", rx_stamp_}};
}

}  // namespace cptrace
