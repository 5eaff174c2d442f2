// ConvertReport rendering: the `--json` object of docs/cli.md and the text a person reads.
#include <nlohmann/json.hpp>
#include <sstream>

#include "ckpt/format/printable.h"
#include "verify/convert/convert.h"

namespace ckpt::verify::convert {

std::string report_json(const ConvertReport& r) {
  nlohmann::json mapped = nlohmann::json::array(), unmapped = nlohmann::json::array();
  for (const auto& m : r.mapped) mapped.push_back({{"path", m.path}, {"to", m.to}, {"as", m.as}});
  for (const auto& u : r.unmapped) unmapped.push_back({{"path", u.path}, {"why", u.why}});
  nlohmann::json j = {{"input", r.input},
                      {"format", format_name(r.format)},
                      {"output", r.output},
                      {"checkpoint", r.checkpoint},
                      {"step", r.step},
                      {"tensors", r.tensors},
                      {"bytes", r.bytes},
                      {"components", r.components},
                      {"mapped", std::move(mapped)},
                      {"unmapped", std::move(unmapped)}};
  return ckpt::json_text(j, -1);
}

std::string report_text(const ConvertReport& r) {
  std::ostringstream o;
  o << r.input << " (" << format_name(r.format) << ") -> " << r.output << "/" << r.checkpoint
    << "\n";
  o << "  step " << r.step << ", " << r.tensors << " tensors, " << r.bytes << " bytes; components";
  for (const auto& c : r.components) o << " " << c;
  o << "\n";
  for (const auto& m : r.mapped)
    o << "  mapped   " << m.path << " -> " << m.to << ": " << m.as << "\n";
  for (const auto& u : r.unmapped) o << "  UNMAPPED " << u.path << ": " << u.why << "\n";
  if (r.unmapped.empty()) {
    o << "everything was converted\n";
  } else {
    o << r.unmapped.size() << " item(s) could not be converted (listed above); the checkpoint "
      << "holds the rest\n";
  }
  return o.str();
}

}  // namespace ckpt::verify::convert
