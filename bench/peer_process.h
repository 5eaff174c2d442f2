// A peer benchmark running in another process (e.g. torch.save in Python), driven line by line:
// the bench writes a request line to its stdin and reads one reply line from its stdout, so the
// peer's runs interleave with the bench's own under the same load. Header-only; one thread.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace ckpt::bench {

class PeerProcess {
 public:
  // Runs `command` with /bin/sh; false when it cannot be started.
  bool start(const std::string& command) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0) return false;
    if (::pipe(from_child) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(to_child[1], "w");
    out_ = ::fdopen(from_child[0], "r");
    return in_ != nullptr && out_ != nullptr;
  }
  ~PeerProcess() {
    if (in_ != nullptr) std::fclose(in_);  // EOF: the peer's loop ends
    if (out_ != nullptr) std::fclose(out_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  // One reply line (without the newline); false at EOF.
  bool read_line(std::string* line) {
    line->clear();
    for (int c; (c = std::fgetc(out_)) != EOF;) {
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
    return !line->empty();
  }
  bool request(const std::string& line, std::string* reply) {
    if (std::fputs((line + "\n").c_str(), in_) < 0 || std::fflush(in_) != 0) return false;
    return read_line(reply);
  }

 private:
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

}  // namespace ckpt::bench
