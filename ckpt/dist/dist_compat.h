// The one place where ckpt/dist deals with differences between libtorch releases' c10d C++ API
// (1.13 as shipped by Debian, 2.x on GPU machines). process_group.cc calls these helpers instead of
// testing TORCH_VERSION_* itself, so a new release means editing this file only.
//
// Checked: this file and process_group.cc compile warning-free against Debian's 1.13.1 and against
// the headers of a 2.15 wheel (which need C++20); none of the calls below needs a TORCH_VERSION_*
// branch. Should one be needed, it goes here, guarded with TORCH_VERSION_MAJOR/MINOR
// (<torch/version.h>).
//
// Differences handled here:
//   - ProcessGroupGloo derives from c10d::ProcessGroup in 1.x and from c10d::Backend in 2.x; its
//     Options derive from the matching ::Options, whose default-timeout constant is named
//     kProcessGroupDefaultTimeout in 1.x and kBackendDefaultTimeout in 2.x. We always pass our own
//     timeout, so neither name is needed; the concrete type is held directly.
//   - Since 2.8 createDeviceForHostname takes a `lazyInit` flag (connect pairs on first use),
//     defaulted to false. We call the one-argument form, valid in every release: pairs are then
//     connected during construction, so a missing peer is reported there, within the timeout,
//     rather than at the first collective.
//   - 2.x's TCPStoreOptions gained `useLibUV` (default true in recent releases) and
//     `masterListenFd`; 1.x has neither. The libuv server is what 2.x tests; we leave it on.
//   - numWorkers is c10::optional in 1.x, std::optional in 2.x: plain assignment works for both.
//   - c10::Error::what_without_backtrace() exists in both; 2.x adds c10::DistError subclasses,
//     which are still c10::Error.
//
// Private to ckpt/dist's .cc files (it pulls in the c10d and gloo headers, which need
// USE_C10D_GLOO); never included from a public header. Stateless; thread-safe.
#pragma once

#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace ckpt::dist::compat {

// A Gloo transport device bound to `host` (an address or name of this machine).
inline std::shared_ptr<::gloo::transport::Device> make_device(const std::string& host) {
  return ::c10d::ProcessGroupGloo::createDeviceForHostname(host);
}

// Options for the Gloo group: one device, two worker threads, `timeout` on every collective and on
// the rendezvous through the store.
inline c10::intrusive_ptr<::c10d::ProcessGroupGloo::Options> make_gloo_options(
    std::shared_ptr<::gloo::transport::Device> device, std::chrono::milliseconds timeout) {
  auto options = ::c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(std::move(device));
  options->threads = 2;
  return options;
}

// TCPStore options: rank 0 hosts the server. The server does not wait for the workers in its
// constructor (waitWorkers = false): with port 0 it must first publish the port it got, and the
// Gloo rendezvous that follows waits for every rank anyway, bounded by the same timeout.
inline ::c10d::TCPStoreOptions make_store_options(bool is_server, uint16_t port, int world_size,
                                                  std::chrono::milliseconds timeout) {
  ::c10d::TCPStoreOptions o;
  o.port = port;
  o.isServer = is_server;
  o.numWorkers = static_cast<std::size_t>(world_size);
  o.waitWorkers = false;
  o.timeout = timeout;
  return o;
}

// The message of an exception thrown by c10d or Gloo, without libtorch's C++ backtrace.
inline std::string describe(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace ckpt::dist::compat
