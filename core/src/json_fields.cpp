// Checked JSON accessors (calico/json_fields.h).
#include "calico/json_fields.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "calico/error.h"

namespace calico {

nlohmann::json parse_json_text(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
}

nlohmann::json parse_json_file(const std::string& path, const std::string& what, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "{}: cannot open '{}'", what, path);
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    require(text.size() <= max_bytes, "{} '{}': file is larger than {} bytes", what, path, max_bytes);
  }
  require(!in.bad(), "{}: cannot read '{}' (is it a folder?)", what, path);
  return parse_json_text(text, fmt::format("{} '{}'", what, path));
}

int64_t json_integer(const nlohmann::json& v, const std::string& what, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    require(u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo, "{} must be an integer in [{}, {}], got {}",
            what, lo, hi, u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    require(i >= lo && i <= hi, "{} must be an integer in [{}, {}], got {}", what, lo, hi, i);
    return i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    require(std::isfinite(d) && d == std::floor(d), "{} must be an integer, got {}", what, v.dump());
    require(d >= static_cast<double>(lo) && d <= static_cast<double>(hi), "{} must be an integer in [{}, {}], got {}",
            what, lo, hi, v.dump());
    return static_cast<int64_t>(d);
  }
  throw Error(fmt::format("{} must be an integer, got {}", what, v.dump()));
}

double json_number(const nlohmann::json& v, const std::string& what, double lo, double hi) {
  require(v.is_number(), "{} must be a number, got {}", what, v.dump());
  const double d = v.get<double>();
  require(std::isfinite(d) && d >= lo && d <= hi, "{} must be a finite number in [{}, {}], got {}", what, lo, hi,
          v.dump());
  return d;
}

std::string json_string(const nlohmann::json& v, const std::string& what) {
  require(v.is_string(), "{} must be a string, got {}", what, v.dump());
  return v.get<std::string>();
}

JsonFields::JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
  require(object_.is_object(), "{} must be a JSON object, got {}", where_, object_.type_name());
}

bool JsonFields::has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }

const nlohmann::json& JsonFields::required(const std::string& key) {
  known_.insert(key);
  if (!has(key)) {
    std::string keys;
    for (const auto& [k, v] : object_.items()) keys += (keys.empty() ? "" : ", ") + k;
    throw Error(fmt::format("{} is missing (the object has: {})", path(key), keys.empty() ? "no keys" : keys));
  }
  return object_.at(key);
}

int64_t JsonFields::integer(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback) {
  known_.insert(key);
  if (!has(key) && fallback) return *fallback;
  return json_integer(required(key), path(key), lo, hi);
}

double JsonFields::number(const std::string& key, double lo, double hi, std::optional<double> fallback) {
  known_.insert(key);
  if (!has(key) && fallback) return *fallback;
  return json_number(required(key), path(key), lo, hi);
}

std::string JsonFields::string(const std::string& key, std::optional<std::string> fallback) {
  known_.insert(key);
  if (!has(key) && fallback) return *fallback;
  return json_string(required(key), path(key));
}

const nlohmann::json& JsonFields::object(const std::string& key) {
  const auto& v = required(key);
  require(v.is_object(), "{} must be a JSON object, got {}", path(key), v.type_name());
  return v;
}

const nlohmann::json& JsonFields::array(const std::string& key) {
  const auto& v = required(key);
  require(v.is_array(), "{} must be a JSON array, got {}", path(key), v.type_name());
  return v;
}

void JsonFields::allow(const std::string& key) { known_.insert(key); }

void JsonFields::finish() const {
  std::string known;
  for (const auto& k : known_) known += (known.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : object_.items())
    require(known_.count(key) != 0, "{}: unknown key '{}' (known keys: {})", where_, key, known);
}

}  // namespace calico
