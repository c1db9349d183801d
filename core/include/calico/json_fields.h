// One checked way to read JSON input (presets, topologies, calibration data, gate matrices, timelines):
// integer fields must be integral and in range, floats finite and in range, strings strings, and keys that
// the reader does not know are an error naming the key and the file. Every error is a calico::Error whose
// message starts with `where` (the file and the object path, e.g. "m.json: configs[2]").
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace calico {

// Parses JSON text; a syntax error becomes a calico::Error naming `origin`.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);
// Reads a whole file (at most max_bytes) and parses it.
nlohmann::json parse_json_file(const std::string& path, const std::string& what, size_t max_bytes = 64 << 20);

// Converts one JSON value with checks. `what` names it in messages ("m.json: configs[0].ranks").
int64_t json_integer(const nlohmann::json& v, const std::string& what, int64_t lo, int64_t hi);
double json_number(const nlohmann::json& v, const std::string& what, double lo, double hi);
std::string json_string(const nlohmann::json& v, const std::string& what);

// The fields of one JSON object. Every accessor marks its key as known; finish() rejects the others.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string where);
  bool has(const std::string& key) const;  // present and not null
  int64_t integer(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback = std::nullopt);
  double number(const std::string& key, double lo, double hi, std::optional<double> fallback = std::nullopt);
  std::string string(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  const nlohmann::json& object(const std::string& key);  // required JSON object
  const nlohmann::json& array(const std::string& key);   // required JSON array
  void allow(const std::string& key);                    // a documented key this reader ignores
  std::string path(const std::string& key) const { return where_ + "." + key; }
  const std::string& where() const { return where_; }
  void finish() const;  // throws for every key not read or allowed (names the first one)

 private:
  const nlohmann::json& required(const std::string& key);
  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string> known_;
};

}  // namespace calico
