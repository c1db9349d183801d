// HDF5 helpers: checked calls, groups, scalar attributes (UTF-8 variable-length strings, int64, uint64,
// double) and group listing. Readers accept fixed-length strings too, since other writers use them.
#include "h5.h"

#include <algorithm>
#include <mutex>

namespace calico::harness::h5 {

void silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

hid_t check(hid_t id, const std::string& what) {
  require(id >= 0, "HDF5: {} failed", what);
  return id;
}

void check(herr_t status, const std::string& what) { require(status >= 0, "HDF5: {} failed", what); }

Id create_group(hid_t parent, const std::string& name) {
  return Id(check(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create group " + name),
            H5Gclose);
}

bool exists(hid_t parent, const std::string& name) { return H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0; }

Id open_group(hid_t parent, const std::string& name, const std::string& where) {
  require(exists(parent, name), "{}: missing group '{}'", where, name);
  H5O_info_t info;
  require(H5Oget_info_by_name(parent, name.c_str(), &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_GROUP,
          "{}: '{}' is not a group", where, name);
  hid_t g = H5Gopen2(parent, name.c_str(), H5P_DEFAULT);
  require(g >= 0, "{}: cannot open group '{}'", where, name);
  return Id(g, H5Gclose);
}

namespace {
Id scalar_space() { return Id(check(H5Screate(H5S_SCALAR), "create scalar dataspace"), H5Sclose); }

void write_scalar(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type, const void* value) {
  Id space = scalar_space();
  Id attr(check(H5Acreate2(obj, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), "create attribute " + name),
          H5Aclose);
  check(H5Awrite(attr, mem_type, value), "write attribute " + name);
}

// Opens attribute `name`, checks it holds exactly one element of type class `cls`.
Id open_scalar_attr(hid_t obj, const std::string& name, H5T_class_t cls, const std::string& where) {
  require(H5Aexists(obj, name.c_str()) > 0, "{}: missing attribute '{}'", where, name);
  Id attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  require(attr.get() >= 0, "{}: cannot open attribute '{}'", where, name);
  Id type(H5Aget_type(attr), H5Tclose);
  require(type.get() >= 0 && H5Tget_class(type) == cls, "{}: attribute '{}' has the wrong type", where, name);
  Id space(H5Aget_space(attr), H5Sclose);
  require(space.get() >= 0 && H5Sget_simple_extent_npoints(space) == 1, "{}: attribute '{}' must hold one value", where,
          name);
  return attr;
}
}  // namespace

void write_attr(hid_t obj, const std::string& name, const std::string& value) {
  // NOTE: fixed-length strings on purpose: variable-length ones live in HDF5's global heap, whose reader in
  // HDF5 1.10 crashes on corrupt files (found by our fuzz target); fixed-length ones are stored inline.
  Id type(check(H5Tcopy(H5T_C_S1), "copy string type"), H5Tclose);
  check(H5Tset_size(type, std::max<size_t>(value.size(), 1)), "set string size");
  check(H5Tset_strpad(type, H5T_STR_NULLPAD), "set string padding");
  check(H5Tset_cset(type, H5T_CSET_UTF8), "set string charset");
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  write_scalar(obj, name, type, type, padded.data());
}

void write_attr(hid_t obj, const std::string& name, int64_t value) {
  write_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_attr_u64(hid_t obj, const std::string& name, uint64_t value) {
  write_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

void write_attr(hid_t obj, const std::string& name, double value) {
  write_scalar(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

std::string read_string_attr(hid_t obj, const std::string& name, const std::string& where) {
  Id attr = open_scalar_attr(obj, name, H5T_STRING, where);
  Id ftype(H5Aget_type(attr), H5Tclose);
  require(H5Tis_variable_str(ftype) == 0, "{}: attribute '{}' must be a fixed-length string", where, name);
  const size_t size = H5Tget_size(ftype);
  require(size > 0 && size <= (1u << 16), "{}: attribute '{}' has a bad string size {}", where, name, size);
  Id mtype(check(H5Tcopy(H5T_C_S1), "copy string type"), H5Tclose);
  // HDF5 does not convert between character sets: read in the file's (ASCII or UTF-8).
  const H5T_cset_t cset = H5Tget_cset(ftype);
  require(cset == H5T_CSET_ASCII || cset == H5T_CSET_UTF8, "{}: attribute '{}' has an unknown charset", where, name);
  check(H5Tset_cset(mtype, cset), "set string charset");
  check(H5Tset_size(mtype, size), "set string size");
  check(H5Tset_strpad(mtype, H5T_STR_NULLPAD), "set string padding");
  std::string s(size, '\0');
  require(H5Aread(attr, mtype, s.data()) >= 0, "{}: cannot read attribute '{}'", where, name);
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

int64_t read_int_attr(hid_t obj, const std::string& name, const std::string& where) {
  Id attr = open_scalar_attr(obj, name, H5T_INTEGER, where);
  int64_t v = 0;
  require(H5Aread(attr, H5T_NATIVE_INT64, &v) >= 0, "{}: cannot read attribute '{}'", where, name);
  return v;
}

uint64_t read_u64_attr(hid_t obj, const std::string& name, const std::string& where) {
  Id attr = open_scalar_attr(obj, name, H5T_INTEGER, where);
  uint64_t v = 0;
  require(H5Aread(attr, H5T_NATIVE_UINT64, &v) >= 0, "{}: cannot read attribute '{}'", where, name);
  return v;
}

double read_double_attr(hid_t obj, const std::string& name, const std::string& where) {
  Id attr = open_scalar_attr(obj, name, H5T_FLOAT, where);
  double v = 0;
  require(H5Aread(attr, H5T_NATIVE_DOUBLE, &v) >= 0, "{}: cannot read attribute '{}'", where, name);
  return v;
}

std::vector<std::string> list_names(hid_t group, const std::string& where, size_t max) {
  H5G_info_t info;
  require(H5Gget_info(group, &info) >= 0, "{}: cannot list group", where);
  require(info.nlinks <= max, "{}: {} entries, at most {} expected", where, info.nlinks, max);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    require(n >= 0 && n < 4096, "{}: cannot read entry {}", where, i);
    std::string s(static_cast<size_t>(n) + 1, '\0');
    require(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size(), H5P_DEFAULT) >= 0,
            "{}: cannot read entry {}", where, i);
    s.resize(static_cast<size_t>(n));
    names.push_back(s);
  }
  return names;
}

}  // namespace calico::harness::h5
