// Thin RAII and checking layer over the HDF5 C API for the trace writer and reader. Every failing call
// throws calico::Error naming the operation and the object; the HDF5 error stack printer is switched off
// so that a bad file gives one clear message, not a page of library diagnostics.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "calico/error.h"

namespace calico::harness::h5 {

// Owns one hid_t and closes it with the right H5*close.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id(Id&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = -1;
    }
    return *this;
  }
  ~Id() { reset(); }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

void silence_errors();  // H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), once
hid_t check(hid_t id, const std::string& what);
void check(herr_t status, const std::string& what);

Id create_group(hid_t parent, const std::string& name);
Id open_group(hid_t parent, const std::string& name, const std::string& where);
bool exists(hid_t parent, const std::string& name);

void write_attr(hid_t obj, const std::string& name, const std::string& value);
void write_attr(hid_t obj, const std::string& name, int64_t value);
void write_attr_u64(hid_t obj, const std::string& name, uint64_t value);
void write_attr(hid_t obj, const std::string& name, double value);

bool has_attr(hid_t obj, const std::string& name);
std::string read_string_attr(hid_t obj, const std::string& name, const std::string& where);
int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& where);
uint64_t read_u64_attr(hid_t obj, const std::string& name, const std::string& where);
double read_double_attr(hid_t obj, const std::string& name, const std::string& where);

// Names of the links in a group, in name order; `max` guards against hostile files.
std::vector<std::string> list_names(hid_t group, const std::string& where, size_t max = 1 << 16);

}  // namespace calico::harness::h5
