// Output files appear only when complete: everything Calico writes goes to a temporary file next to the
// target and is renamed over it at the end. Temporary files are removed on error (the destructor), and on
// SIGINT/SIGTERM (a handler unlinks every registered temporary file, then lets the signal end the process).
#pragma once

#include <fstream>
#include <string>

namespace calico {

// Checks that `path` can be an output file: not empty, not a folder, and its folder exists and is a folder.
// Throws calico::Error naming `what` (the option, e.g. "--out") otherwise.
void check_output_path(const std::string& path, const std::string& what);

// A temporary file beside `path`, renamed over it by commit(); removed if commit() never ran.
class OutputFile {
 public:
  OutputFile(std::string path, std::string what);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  const std::string& temp_path() const { return temp_; }
  const std::string& path() const { return path_; }
  void commit();  // renames the temporary file to the target (throws calico::Error on failure)

 private:
  std::string path_, what_, temp_;
  int slot_ = -1;
  bool committed_ = false;
};

// A text output file: write to stream(), then commit().
class TextOutputFile {
 public:
  TextOutputFile(std::string path, std::string what);
  std::ofstream& stream() { return out_; }
  void commit();

 private:
  OutputFile file_;
  std::ofstream out_;
};

// The whole file at once.
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

// For tests: the number of temporary files registered now (created and not yet committed or removed).
int pending_temp_files();

}  // namespace calico
