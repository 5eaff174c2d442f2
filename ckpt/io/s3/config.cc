// S3 configuration from the environment and the AWS CLI's files. Order of precedence, per item,
// is the one in config.h; the files are read once each and only their profile's section is used.
#include "ckpt/io/s3/config.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <tuple>
#include <utility>

namespace ckpt::s3 {
namespace {

bool valid_bucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(b.front()) && alnum(b.back());
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// One INI section of an AWS file: key → value; a nested block ("s3 =" then indented
// "addressing_style = path") is stored as "s3.addressing_style".
using Section = std::map<std::string, std::string>;

struct IniFile {
  std::string path;
  bool exists = false;
  std::map<std::string, Section> sections;
};

IniFile read_ini(const std::string& path) {
  IniFile f;
  f.path = path;
  std::ifstream in(path);
  if (!in) return f;
  f.exists = true;
  std::string line, section, parent;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = trim(t.substr(1, t.size() - 2));
      f.sections[section];
      parent.clear();
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    std::string key = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
    if (indented && !parent.empty()) {
      f.sections[section][parent + "." + key] = value;
      continue;
    }
    parent = value.empty() ? key : "";
    f.sections[section][key] = value;
  }
  return f;
}

const Section* find_section(const IniFile& f, const std::string& name) {
  auto it = f.sections.find(name);
  return it == f.sections.end() ? nullptr : &it->second;
}

std::string get(const Section* s, const std::string& key) {
  if (s == nullptr) return "";
  auto it = s->find(key);
  return it == s->end() ? "" : it->second;
}

// http(s)://host[:port], an optional trailing '/'.
Result<Endpoint> parse_endpoint(const std::string& url, const std::string& from) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("S3 endpoint \"" + url + "\" from " + from + ": " + why +
                            " (expected http(s)://host[:port])");
  };
  Endpoint e;
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    e.scheme = "http";
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    e.scheme = "https";
    rest = url.substr(8);
  } else {
    return bad("not http or https");
  }
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return bad("no host");
  for (char c : rest) {
    if (c == '/' || c == '?' || c == '#') return bad("a path is not allowed");
    if (c == '@' || std::isspace(static_cast<unsigned char>(c))) return bad("bad host");
  }
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    std::string port = rest.substr(colon + 1);
    if (colon == 0) return bad("no host");
    if (port.empty() || port.size() > 5) return bad("bad port");
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return bad("bad port");
    }
    if (std::stoi(port) < 1 || std::stoi(port) > 65535) return bad("bad port");
  }
  e.host = rest;
  e.path_style = true;
  return e;
}

// An optional integer variable within [lo, hi]; `*out` is left alone when unset.
template <typename T>
Status read_number(const Lookup& env, const std::string& name, T lo, T hi, T* out) {
  std::string v = env(name);
  if (v.empty()) return Status::ok();
  bool ok = !v.empty() && v.size() <= 19;
  for (char c : v) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (ok) {
    unsigned long long n = std::stoull(v);
    if (n >= static_cast<unsigned long long>(lo) && n <= static_cast<unsigned long long>(hi)) {
      *out = static_cast<T>(n);
      return Status::ok();
    }
  }
  return invalid_argument(name + "=\"" + v + "\": expected an integer in [" + std::to_string(lo) +
                          ", " + std::to_string(hi) + "]");
}

Status read_seconds(const Lookup& env, const std::string& name, double* out) {
  std::string v = env(name);
  if (v.empty()) return Status::ok();
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d > 0) || d > 86400) {
    return invalid_argument(name + "=\"" + v + "\": expected seconds in (0, 86400]");
  }
  *out = d;
  return Status::ok();
}

}  // namespace

Result<S3Url> parse_s3_url(const std::string& url) {
  const std::string prefix = "s3://";
  if (url.rfind(prefix, 0) != 0) {
    return invalid_argument("\"" + url + "\" is not an S3 URL (expected s3://BUCKET[/KEY])");
  }
  std::string rest = url.substr(prefix.size());
  size_t slash = rest.find('/');
  S3Url u;
  u.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) u.key = rest.substr(slash + 1);
  if (!valid_bucket(u.bucket)) {
    return invalid_argument("\"" + url + "\": bucket name \"" + u.bucket +
                            "\" is not 3-63 characters of [a-z0-9.-] starting and ending with a "
                            "letter or digit");
  }
  return u;
}

std::string s3_url(const std::string& bucket, const std::string& key) {
  return "s3://" + bucket + (key.empty() ? "" : "/" + key);
}

std::string S3Config::describe() const {
  const std::string& id = credentials.access_key_id;
  std::string tail = id.size() > 4 ? id.substr(id.size() - 4) : id;
  return endpoint.scheme + "://" + endpoint.host + " (region " + region + ", " +
         (endpoint.path_style ? "path-style" : "virtual-hosted") + ", key \u2026" + tail +
         " from " + credentials.source + ")";
}

Lookup process_environment() {
  return [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v == nullptr ? std::string() : std::string(v);
  };
}

Lookup lookup_in(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
}

Result<S3Config> load_config(const Lookup& env) {
  S3Config cfg;
  std::string home = env("HOME");
  std::string cred_path = env("AWS_SHARED_CREDENTIALS_FILE");
  if (cred_path.empty()) cred_path = home + "/.aws/credentials";
  std::string conf_path = env("AWS_CONFIG_FILE");
  if (conf_path.empty()) conf_path = home + "/.aws/config";
  std::string profile = env("AWS_PROFILE");
  bool profile_named = !profile.empty();
  if (!profile_named) profile = "default";

  IniFile cred_file = read_ini(cred_path);
  IniFile conf_file = read_ini(conf_path);
  const Section* cred_sec = find_section(cred_file, profile);
  const Section* conf_sec = find_section(conf_file, "profile " + profile);
  if (conf_sec == nullptr && profile == "default") conf_sec = find_section(conf_file, "default");
  if (profile_named && cred_sec == nullptr && conf_sec == nullptr) {
    return invalid_argument("AWS_PROFILE=\"" + profile + "\": no such profile in " + cred_path +
                            " or " + conf_path);
  }
  // A setting from the config file's profile, else the credentials file's.
  auto setting = [&](const std::string& key) {
    std::string v = get(conf_sec, key);
    return v.empty() ? get(cred_sec, key) : v;
  };

  // Region.
  cfg.region = env("AWS_REGION");
  if (cfg.region.empty()) cfg.region = env("AWS_DEFAULT_REGION");
  if (cfg.region.empty()) cfg.region = setting("region");
  if (cfg.region.empty()) cfg.region = "us-east-1";

  // Endpoint and addressing.
  std::string url = env("AWS_ENDPOINT_URL_S3"), from = "AWS_ENDPOINT_URL_S3";
  if (url.empty()) url = env("AWS_ENDPOINT_URL"), from = "AWS_ENDPOINT_URL";
  if (url.empty()) url = setting("endpoint_url"), from = "profile \"" + profile + "\"";
  if (!url.empty()) {
    CKPT_ASSIGN_OR_RETURN(cfg.endpoint, parse_endpoint(url, from));
  } else {
    cfg.endpoint.scheme = "https";
    cfg.endpoint.host = "s3." + cfg.region + ".amazonaws.com";
    cfg.endpoint.path_style = false;
  }
  std::string style = env("CKPT_S3_ADDRESSING"), style_from = "CKPT_S3_ADDRESSING";
  if (style.empty()) {
    style = setting("s3.addressing_style");
    style_from = "profile \"" + profile + "\" s3.addressing_style";
  }
  if (style == "path") {
    cfg.endpoint.path_style = true;
  } else if (style == "virtual") {
    cfg.endpoint.path_style = false;
  } else if (!style.empty() && style != "auto") {
    return invalid_argument(style_from + "=\"" + style + "\": expected path or virtual");
  }

  // Credentials.
  std::string id = env("AWS_ACCESS_KEY_ID"), secret = env("AWS_SECRET_ACCESS_KEY");
  if (!id.empty() || !secret.empty()) {
    if (id.empty() || secret.empty()) {
      return invalid_argument(
          std::string(id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
          " is unset while " + (id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
          " is set");
    }
    cfg.credentials = {id, secret, env("AWS_SESSION_TOKEN"), "environment"};
  } else {
    bool found = false;
    for (const auto& [file, sec, name] :
         {std::make_tuple(&cred_file, cred_sec, profile),
          std::make_tuple(&conf_file, conf_sec, "profile " + profile)}) {
      std::string fid = get(sec, "aws_access_key_id");
      std::string fsecret = get(sec, "aws_secret_access_key");
      if (fid.empty() && fsecret.empty()) continue;
      if (fid.empty() || fsecret.empty()) {
        return invalid_argument(
            file->path + " [" + name +
            "]: " + (fid.empty() ? "aws_access_key_id" : "aws_secret_access_key") + " is missing");
      }
      cfg.credentials = {fid, fsecret, get(sec, "aws_session_token"),
                         file->path + " [" + name + "]"};
      found = true;
      break;
    }
    if (!found) {
      return invalid_argument(
          "no S3 credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are unset and profile \"" +
          profile + "\" has none in " + cred_path + (cred_file.exists ? "" : " (absent)") + " or " +
          conf_path + (conf_file.exists ? "" : " (absent)"));
    }
  }

  // Transfer settings.
  CKPT_RETURN_IF_ERROR(read_number<uint64_t>(env, "CKPT_S3_PART_BYTES", uint64_t{5} << 20,
                                             uint64_t{5} << 30, &cfg.part_bytes));
  CKPT_RETURN_IF_ERROR(read_number<int>(env, "CKPT_S3_CONCURRENCY", 1, 256, &cfg.concurrency));
  CKPT_RETURN_IF_ERROR(read_number<int>(env, "CKPT_S3_MAX_ATTEMPTS", 1, 100, &cfg.max_attempts));
  CKPT_RETURN_IF_ERROR(read_seconds(env, "CKPT_S3_CONNECT_TIMEOUT_S", &cfg.connect_timeout_s));
  CKPT_RETURN_IF_ERROR(read_seconds(env, "CKPT_S3_REQUEST_TIMEOUT_S", &cfg.request_timeout_s));
  return cfg;
}

std::string redact(const std::string& text, const Credentials& c) {
  std::string out = text;
  for (const std::string* s : {&c.secret_access_key, &c.session_token}) {
    if (s->empty()) continue;
    for (size_t pos = out.find(*s); pos != std::string::npos; pos = out.find(*s, pos + 3)) {
      out.replace(pos, s->size(), "***");
    }
  }
  return out;
}

}  // namespace ckpt::s3
