#include "verify/scan/risk.h"

#include <set>

#include "verify/pickle/interpret.h"

namespace ckpt::verify {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Module roots whose callables exist to touch the OS, the interpreter, files or the network.
const std::set<std::string>& dangerous_roots() {
  static const std::set<std::string> k = {"os",
                                          "posix",
                                          "nt",
                                          "subprocess",
                                          "_posixsubprocess",
                                          "pty",
                                          "sys",
                                          "importlib",
                                          "runpy",
                                          "code",
                                          "codeop",
                                          "commands",
                                          "pickle",
                                          "_pickle",
                                          "cPickle",
                                          "marshal",
                                          "dill",
                                          "joblib",
                                          "cloudpickle",
                                          "shelve",
                                          "socket",
                                          "_socket",
                                          "ssl",
                                          "http",
                                          "httplib",
                                          "urllib",
                                          "urllib2",
                                          "urllib3",
                                          "requests",
                                          "aiohttp",
                                          "httpx",
                                          "ftplib",
                                          "smtplib",
                                          "telnetlib",
                                          "poplib",
                                          "imaplib",
                                          "nntplib",
                                          "xmlrpc",
                                          "socketserver",
                                          "webbrowser",
                                          "shutil",
                                          "tempfile",
                                          "glob",
                                          "fileinput",
                                          "io",
                                          "_io",
                                          "pip",
                                          "setuptools",
                                          "distutils",
                                          "ctypes",
                                          "_ctypes",
                                          "cffi",
                                          "multiprocessing",
                                          "concurrent",
                                          "asyncio",
                                          "threading",
                                          "_thread",
                                          "signal",
                                          "pdb",
                                          "bdb",
                                          "timeit",
                                          "profile",
                                          "cProfile",
                                          "trace",
                                          "pydoc",
                                          "platform",
                                          "uuid",
                                          "_osx_support",
                                          "_aix_support",
                                          "ensurepip",
                                          "venv",
                                          "zipimport",
                                          "pkgutil",
                                          "inspect",
                                          "types",
                                          "gc",
                                          "ntpath",
                                          "posixpath",
                                          "sysconfig",
                                          "site",
                                          "logging",
                                          "mailcap",
                                          "cgi",
                                          "antigravity",
                                          "this",
                                          "turtle",
                                          "tkinter",
                                          "idlelib",
                                          "lib2to3",
                                          "doctest",
                                          "unittest",
                                          "test",
                                          "zipfile",
                                          "tarfile",
                                          "sqlite3",
                                          "dbm",
                                          "select",
                                          "selectors",
                                          "mmap",
                                          "resource",
                                          "fcntl",
                                          "termios",
                                          "tty",
                                          "syslog",
                                          "grp",
                                          "pwd",
                                          "spwd",
                                          "crypt",
                                          "readline",
                                          "rlcompleter",
                                          "operator",
                                          "_operator",
                                          "numexpr",
                                          "IPython",
                                          "jinja2",
                                          "yaml"};
  return k;
}

const std::set<std::string>& dangerous_builtins() {
  static const std::set<std::string> k = {
      "eval",       "exec",    "execfile",   "compile", "__import__", "getattr",
      "setattr",    "delattr", "open",       "file",    "input",      "raw_input",
      "breakpoint", "globals", "locals",     "vars",    "exit",       "quit",
      "help",       "reload",  "memoryview", "apply",   "__loader__", "__build_class__",
      "copyright",  "credits", "license"};
  return k;
}

// Dangerous names outside the dangerous roots: re-entry into loaders, code execution helpers.
const std::set<std::string>& dangerous_names() {
  static const std::set<std::string> k = {
      "torch.load",
      "torch.serialization.load",
      "torch.serialization._load",
      "torch.serialization._legacy_load",
      "torch.jit.load",
      "torch.jit._serialization.load",
      "torch.hub.load",
      "torch.hub.load_state_dict_from_url",
      "torch.hub.download_url_to_file",
      "torch.utils.cpp_extension.load",
      "torch.utils.cpp_extension.load_inline",
      "torch.package.PackageImporter",
      "torch._C._jit_pass_lower_all_tuples",
      "numpy.load",
      "numpy.testing._private.utils.runstring",
      "numpy.lib.npyio.load",
      "numpy.f2py.compile",
      "numpy.distutils.exec_command.exec_command",
      "functools.reduce",
      "functools.partial",  // only dangerous when what it wraps is: see classify_use
      "transformers.dynamic_module_utils.get_class_from_dynamic_module",
      "transformers.utils.hub.cached_file",
      "huggingface_hub.hf_hub_download",
      "datasets.load_dataset"};
  return k;
}

// Module prefixes under torch that load code or reach the OS.
bool dangerous_torch_module(const std::string& m) {
  for (const char* p :
       {"torch.hub", "torch.jit", "torch.package", "torch.utils.cpp_extension", "torch._dynamo",
        "torch._inductor", "torch.distributed.rpc", "torch.multiprocessing", "torch.ops",
        "torch._C", "torch.backends", "torch.compiler", "torch.utils.data.datapipes",
        "torch._export", "torch.export", "torch.fx", "torch.onnx", "torch.testing"}) {
    if (m == p || starts_with(m, std::string(p) + ".")) return true;
  }
  return false;
}

// io.BytesIO only builds an in-memory buffer of the bytes it is given (DCP and torchtitan's
// TrainState save such values); the rest of io stays dangerous.
const std::set<std::string>& safe_names() {
  static const std::set<std::string> k = {"collections.OrderedDict",
                                          "collections.Counter",
                                          "collections.defaultdict",
                                          "collections.deque",
                                          "_codecs.encode",
                                          "copyreg._reconstructor",
                                          "builtins.set",
                                          "builtins.frozenset",
                                          "builtins.bytes",
                                          "builtins.bytearray",
                                          "builtins.complex",
                                          "builtins.slice",
                                          "builtins.range",
                                          "builtins.object",
                                          "builtins.int",
                                          "builtins.float",
                                          "builtins.str",
                                          "builtins.list",
                                          "builtins.dict",
                                          "builtins.tuple",
                                          "builtins.bool",
                                          "numpy.core.multiarray._reconstruct",
                                          "numpy.core.multiarray.scalar",
                                          "numpy.core.numeric._frombuffer",
                                          "numpy.ndarray",
                                          "numpy.dtype",
                                          "torch.Size",
                                          "torch.device",
                                          "torch.Tensor",
                                          "torch.nn.parameter.Parameter",
                                          "torch.serialization._get_layout",
                                          "torch._tensor._rebuild_from_type_v2",
                                          "datetime.datetime",
                                          "datetime.date",
                                          "datetime.timedelta",
                                          "datetime.timezone",
                                          "decimal.Decimal",
                                          "fractions.Fraction",
                                          "uuid.UUID",
                                          "_io.BytesIO",
                                          "io.BytesIO"};
  return k;
}

// Classes of training frameworks seen in real checkpoints, by exact name.
const std::set<std::string>& framework_names() {
  static const std::set<std::string> k = {
      "argparse.Namespace", "enum.Enum", "pathlib.PosixPath", "pathlib.WindowsPath",
      "pathlib.PurePosixPath", "pathlib.Path", "types.SimpleNamespace",
      "omegaconf.dictconfig.DictConfig", "omegaconf.listconfig.ListConfig",
      "omegaconf.base.ContainerMetadata", "omegaconf.base.Metadata", "omegaconf.nodes.AnyNode",
      "typing.Any", "numpy.random._pickle.__randomstate_ctor",
      "numpy.random._pickle.__generator_ctor", "numpy.random._pickle.__bit_generator_ctor",
      // A dataclass with a lower-case name, in DeepSpeed ZeRO optimizer states.
      "deepspeed.utils.tensor_fragment.fragment_address",
      // An IntEnum looked up by value (Signals(15)): Megatron-LM's args.exit_signal. The rest of
      // the signal module stays dangerous.
      "signal.Signals"};
  return k;
}

// Roots whose capitalised (class) names are framework classes unless a list says otherwise.
bool framework_root(const std::string& root) {
  static const std::set<std::string> k = {"torch",
                                          "transformers",
                                          "accelerate",
                                          "lightning",
                                          "pytorch_lightning",
                                          "lightning_fabric",
                                          "deepspeed",
                                          "megatron",
                                          "apex",
                                          "torchdata",
                                          "torchvision",
                                          "timm",
                                          "mmengine",
                                          "peft",
                                          "trl",
                                          "diffusers",
                                          "numpy",
                                          "omegaconf",
                                          "fairscale",
                                          "sentencepiece",
                                          "tokenizers"};
  return k.count(root) != 0;
}

// "AdamW", "_StorageInfo", "_MEM_FORMAT_ENCODING": a class or enum by Python's naming habit.
bool is_class_name(const std::string& name) {
  size_t k = name.find_first_not_of('_');
  return k != std::string::npos && name[k] >= 'A' && name[k] <= 'Z' &&
         name.find('.') == std::string::npos;
}

bool is_safe(const std::string& module, const std::string& name) {
  const std::string q = module + "." + name;
  if (safe_names().count(q) != 0) return true;
  if (module == "torch._utils" && starts_with(name, "_rebuild_")) return true;
  if (module == "torch" && (name.size() > 7 && name.compare(name.size() - 7, 7, "Storage") == 0))
    return true;
  if (module == "torch" && weights_only_allows(module, name)) return true;  // dtypes, qschemes
  static const std::set<std::string> kTorchConstants = {
      "strided",       "sparse_coo",       "sparse_csr",     "sparse_csc",
      "sparse_bsr",    "sparse_bsc",       "_mkldnn",        "contiguous_format",
      "channels_last", "channels_last_3d", "preserve_format"};
  if (module == "torch" && kTorchConstants.count(name) != 0) return true;
  if (module == "numpy.dtypes" && is_class_name(name)) return true;
  return false;
}

bool is_dangerous_name(const std::string& module, const std::string& name) {
  const std::string root = module.substr(0, module.find('.'));
  if (dangerous_roots().count(root) != 0) return true;
  if (module == "builtins" && dangerous_builtins().count(name) != 0) return true;
  if (module == "__main__" && dangerous_builtins().count(name) != 0) return true;
  const std::string q = module + "." + name;
  if (dangerous_names().count(q) != 0 && q != "functools.partial") return true;
  if (root == "torch" && dangerous_torch_module(module)) return true;
  if (root == "numpy" &&
      (starts_with(module, "numpy.testing") || starts_with(module, "numpy.f2py") ||
       starts_with(module, "numpy.distutils")))
    return true;
  // Dotted names reach through attributes (find_class follows them): never a plain class.
  if (name.find('.') != std::string::npos) return true;
  return false;
}

}  // namespace

const char* risk_name(Risk r) {
  switch (r) {
    case Risk::kSafe:
      return "safe";
    case Risk::kFramework:
      return "framework";
    case Risk::kUnknown:
      return "unknown";
    case Risk::kDangerous:
      return "dangerous";
  }
  return "?";
}

Risk classify_use(const GlobalUse& use) {
  const std::string module = normalize_module(use.module);
  const std::string& name = use.name;
  if (module == "builtins" && name == "getattr" && use.called && !use.bound_method_of.empty()) {
    size_t dot = use.bound_method_of.rfind('.');
    GlobalUse owner{
        use.bound_method_of.substr(0, dot), use.bound_method_of.substr(dot + 1), 0, true, "", ""};
    Risk r = classify_use(owner);
    if (r == Risk::kSafe || r == Risk::kFramework) return Risk::kFramework;
    return Risk::kDangerous;
  }
  const std::string q = module + "." + name;
  if (safe_names().count(q) != 0) return Risk::kSafe;
  if (framework_names().count(q) != 0) return Risk::kFramework;
  if (is_dangerous_name(module, name)) return Risk::kDangerous;
  if (is_safe(module, name)) return Risk::kSafe;
  const std::string root = module.substr(0, module.find('.'));
  if (q == "functools.partial" || q == "functools.partialmethod") {
    // What it wraps is marked called when the partial is called; the partial itself is plumbing.
    return use.called ? Risk::kFramework : Risk::kUnknown;
  }
  if (framework_root(root) && is_class_name(name)) return Risk::kFramework;
  // TorchScript classes: defined by the archive's TorchScript code, which has no Python.
  if (root == "__torch__" && name.find('.') == std::string::npos) return Risk::kFramework;
  return use.called ? Risk::kDangerous : Risk::kUnknown;
}

bool weights_only_allows(const std::string& module, const std::string& name) {
  static const std::set<std::string> kNames = {"collections.OrderedDict",
                                               "collections.Counter",
                                               "torch.nn.parameter.Parameter",
                                               "torch.serialization._get_layout",
                                               "torch.Size",
                                               "torch.Tensor",
                                               "torch.device",
                                               "_codecs.encode",
                                               "builtins.bytearray",
                                               "builtins.set",
                                               "builtins.complex",
                                               "torch._tensor._rebuild_from_type_v2",
                                               "torch.per_channel_affine",
                                               "torch.per_channel_affine_float_qparams",
                                               "torch.per_channel_symmetric",
                                               "torch.per_tensor_affine",
                                               "torch.per_tensor_symmetric"};
  static const std::set<std::string> kRebuilds = {"_rebuild_device_tensor_from_cpu_tensor",
                                                  "_rebuild_device_tensor_from_numpy",
                                                  "_rebuild_meta_tensor_no_storage",
                                                  "_rebuild_parameter",
                                                  "_rebuild_parameter_with_state",
                                                  "_rebuild_qtensor",
                                                  "_rebuild_sparse_tensor",
                                                  "_rebuild_tensor",
                                                  "_rebuild_tensor_v2",
                                                  "_rebuild_tensor_v3",
                                                  "_rebuild_wrapper_subclass"};
  static const std::set<std::string> kDtypes = {"bcomplex32",
                                                "bfloat16",
                                                "bits16",
                                                "bits1x8",
                                                "bits2x4",
                                                "bits4x2",
                                                "bits8",
                                                "bool",
                                                "complex128",
                                                "complex32",
                                                "complex64",
                                                "float16",
                                                "float32",
                                                "float64",
                                                "half",
                                                "float",
                                                "double",
                                                "int1",
                                                "int16",
                                                "int2",
                                                "int3",
                                                "int32",
                                                "int4",
                                                "int5",
                                                "int6",
                                                "int64",
                                                "int7",
                                                "int8",
                                                "qint32",
                                                "qint8",
                                                "quint2x4",
                                                "quint4x2",
                                                "quint8",
                                                "uint1",
                                                "uint16",
                                                "uint2",
                                                "uint3",
                                                "uint32",
                                                "uint4",
                                                "uint5",
                                                "uint6",
                                                "uint64",
                                                "uint7",
                                                "uint8",
                                                "float8_e4m3fn",
                                                "float8_e5m2",
                                                "float8_e4m3fnuz",
                                                "float8_e5m2fnuz",
                                                "float8_e8m0fnu",
                                                "float4_e2m1fn_x2"};
  const std::string q = module + "." + name;
  if (kNames.count(q) != 0) return true;
  if (module == "torch._utils") return kRebuilds.count(name) != 0;
  const bool tensor_module = module == "torch" || module == "torch.cuda" ||
                             module == "torch.sparse" || module == "torch.cuda.sparse";
  const auto ends_with = [&name](const char* suf) {
    const std::string s = suf;
    return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (tensor_module && (ends_with("Tensor") || ends_with("Storage"))) return true;
  if (module == "torch") return kDtypes.count(name) != 0;
  return false;
}

}  // namespace ckpt::verify
