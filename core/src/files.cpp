// Temporary + rename output files with SIGINT/SIGTERM clean-up (calico/files.h).
#include "calico/files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "calico/error.h"

namespace calico {
namespace {

// Fixed slots so that the signal handler touches no allocator: each holds a strdup'd path or null.
constexpr int kSlots = 256;
std::atomic<char*> g_slots[kSlots];
std::atomic<int> g_pending{0};
std::once_flag g_handler_once;

extern "C" void remove_temps_and_reraise(int sig) {
  for (auto& slot : g_slots)
    if (char* p = slot.load()) unlink(p);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_handler() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_DFL) continue;  // someone (MPI, a test runner) owns this signal: leave it
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_reraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

int register_temp(const std::string& path) {
  std::call_once(g_handler_once, install_handler);
  char* copy = strdup(path.c_str());
  for (int i = 0; i < kSlots; ++i) {
    char* expected = nullptr;
    if (g_slots[i].compare_exchange_strong(expected, copy)) {
      ++g_pending;
      return i;
    }
  }
  std::free(copy);  // all slots taken: still removed on error, just not on a signal
  ++g_pending;
  return -1;
}

void unregister_temp(int slot) {
  --g_pending;
  if (slot < 0) return;
  std::free(g_slots[slot].exchange(nullptr));
}

}  // namespace

void check_output_path(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  require(!path.empty(), "{}: the output path is empty", what);
  std::error_code ec;
  require(!fs::is_directory(path, ec), "{}: '{}' is a folder, not a file", what, path);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    require(fs::exists(parent, ec), "{}: the folder of '{}' does not exist", what, path);
    require(fs::is_directory(parent, ec), "{}: '{}' is not a folder (in '{}')", what, parent.string(), path);
  }
}

OutputFile::OutputFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  namespace fs = std::filesystem;
  check_output_path(path_, what_);
  const fs::path target(path_);
  temp_ = (target.parent_path() / fmt::format(".{}.tmp-{}", target.filename().string(), getpid())).string();
  slot_ = register_temp(temp_);
}

OutputFile::~OutputFile() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
    unregister_temp(slot_);
  }
}

void OutputFile::commit() {
  require(!committed_, "{}: '{}' committed twice", what_, path_);
  std::error_code ec;
  std::filesystem::rename(temp_, path_, ec);
  require(!ec, "{}: cannot write '{}': {}", what_, path_, ec.message());
  committed_ = true;
  unregister_temp(slot_);
}

TextOutputFile::TextOutputFile(std::string path, std::string what)
    : file_(std::move(path), std::move(what)), out_(file_.temp_path(), std::ios::binary | std::ios::trunc) {
  require(static_cast<bool>(out_), "cannot write '{}' (is the folder writable?)", file_.path());
}

void TextOutputFile::commit() {
  out_.flush();
  require(static_cast<bool>(out_), "error writing '{}' (disk full?)", file_.path());
  out_.close();
  file_.commit();
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  TextOutputFile f(path, what);
  f.stream() << text;
  f.commit();
}

int pending_temp_files() { return g_pending.load(); }

}  // namespace calico
