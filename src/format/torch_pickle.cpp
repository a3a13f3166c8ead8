#include "format/torch_pickle.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "util/error.h"
#include "util/half.h"

namespace oscar {
namespace {

constexpr int kMaxTensorDims = 8;

using Kind = PickleValue::Kind;

// The storage classes torch.save names, and the dtypes of their elements.
bool storage_dtype(std::string_view global, DType* dtype) {
  if (global == "torch.FloatStorage")
    *dtype = DType::f32;
  else if (global == "torch.DoubleStorage")
    *dtype = DType::f64;
  else if (global == "torch.HalfStorage")
    *dtype = DType::f16;
  else if (global == "torch.BFloat16Storage")
    *dtype = DType::bf16;
  else
    return false;
  return true;
}

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> input, const TorchStorageLoader& load_storage,
            const std::string& context)
      : input_(input), load_storage_(load_storage), context_(context) {}

  PickleValue run() {
    while (true) {
      opcode_at_ = position_;
      const uint8_t op = byte();
      if (op == '.') break;
      step(op);
    }
    require_here(stack_.size() == 1 && marks_.empty(), "STOP with {} values on the stack",
                 stack_.size());
    check_plain(stack_.back(), 0);
    return std::move(stack_.back());
  }

 private:
  template <typename... Args>
  void require_here(bool condition, fmt::format_string<Args...> format, Args&&... args) {
    if (!condition) {
      fail("{}: pickle byte {}: {}", context_, opcode_at_,
           fmt::format(format, std::forward<Args>(args)...));
    }
  }

  std::span<const std::byte> take(size_t count) {
    require_here(count <= input_.size() - position_, "truncated: {} bytes wanted, {} left", count,
                 input_.size() - position_);
    const auto bytes = input_.subspan(position_, count);
    position_ += count;
    return bytes;
  }
  uint8_t byte() { return uint8_t(take(1)[0]); }
  uint64_t little_endian(size_t count) {
    const auto bytes = take(count);
    uint64_t value = 0;
    for (size_t i = 0; i < count; ++i) value |= uint64_t(uint8_t(bytes[i])) << (8 * i);
    return value;
  }
  std::string line() {
    std::string text;
    while (true) {
      const char c = char(byte());
      if (c == '\n') return text;
      require_here(text.size() < 256, "a GLOBAL name longer than 256 bytes");
      text += c;
    }
  }

  // Every value made or copied is charged to the budget.
  PickleValue& push(PickleValue value) {
    require_here(value.depth <= kMaxPickleDepth, "nesting deeper than {}", kMaxPickleDepth);
    spent_ += value.nodes;
    require_here(spent_ <= kMaxPickleNodes, "more than {} values made or copied", kMaxPickleNodes);
    stack_.push_back(std::move(value));
    return stack_.back();
  }
  PickleValue pop() {
    require_here(stack_.size() > stack_floor(), "the stack is empty");
    PickleValue value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  PickleValue& top() {
    require_here(stack_.size() > stack_floor(), "the stack is empty");
    return stack_.back();
  }
  std::vector<PickleValue> pop_to_mark() {
    require_here(!marks_.empty(), "no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValue> items(std::make_move_iterator(stack_.begin() + long(mark)),
                                   std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  static PickleValue scalar(Kind kind) {
    PickleValue value;
    value.kind = kind;
    return value;
  }
  static PickleValue integer(int64_t number) {
    PickleValue value = scalar(Kind::integer);
    value.integer = number;
    return value;
  }
  static void account(PickleValue& container, const PickleValue& item) {
    container.nodes += item.nodes;
    container.depth = std::max(container.depth, item.depth + 1);
  }
  PickleValue container(Kind kind, std::vector<PickleValue> items) {
    PickleValue value = scalar(kind);
    for (const PickleValue& item : items) account(value, item);
    value.items = std::move(items);
    return value;
  }

  // Adds items (key, value pairs for a dict) to the container below them on the stack.
  void extend(PickleValue& target, std::vector<PickleValue> items, bool dict) {
    require_here(target.kind == (dict ? Kind::dict : Kind::list), "{} on a {}",
                 dict ? "SETITEM" : "APPEND", kind_name(target.kind));
    for (size_t i = 0; i < items.size(); ++i) {
      if (dict && i % 2 == 0) {
        require_here(items[i].kind == Kind::string || items[i].kind == Kind::integer,
                     "a dict key of kind {} (only str and int keys are read)",
                     kind_name(items[i].kind));
      }
      account(target, items[i]);
      require_here(target.depth <= kMaxPickleDepth, "nesting deeper than {}", kMaxPickleDepth);
      target.items.push_back(std::move(items[i]));
    }
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t protocol = byte();
        require_here(protocol >= 2 && protocol <= 5, "pickle protocol {} (2-5 are read)", protocol);
        return;
      }
      case 0x95:
        take(8);
        return;  // FRAME: a length hint
      case '(':
        marks_.push_back(stack_.size());
        return;
      case 'N':
        push(scalar(Kind::none));
        return;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        PickleValue value = scalar(Kind::boolean);
        value.integer = op == 0x88;
        push(std::move(value));
        return;
      }
      case 'K':
        push(integer(int64_t(little_endian(1))));
        return;
      case 'M':
        push(integer(int64_t(little_endian(2))));
        return;
      case 'J':
        push(integer(int64_t(int32_t(uint32_t(little_endian(4))))));
        return;
      case 0x8a: {  // LONG1: a little-endian two's complement integer of n bytes
        const uint8_t count = byte();
        require_here(count <= 8, "an integer of {} bytes (at most 8 are read)", count);
        uint64_t bits = little_endian(count);
        if (count > 0 && count < 8 && (bits >> (8 * count - 1)) != 0)
          bits |= ~uint64_t(0) << (8 * count);
        push(integer(int64_t(bits)));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const auto bytes = take(8);
        uint64_t bits = 0;
        for (const std::byte b : bytes) bits = (bits << 8) | uint8_t(b);
        PickleValue value = scalar(Kind::real);
        std::memcpy(&value.real, &bits, sizeof(bits));
        push(std::move(value));
        return;
      }
      case 'X':
      case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
        const uint64_t length = little_endian(op == 'X' ? 4 : 1);
        const auto bytes = take(size_t(length));
        PickleValue value = scalar(Kind::string);
        value.text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        value.nodes += value.text.size() / 64;
        push(std::move(value));
        return;
      }
      case '}':
        push(scalar(Kind::dict));
        return;
      case ']':
        push(scalar(Kind::list));
        return;
      case ')':
        push(scalar(Kind::tuple));
        return;
      case 't':
        push(container(Kind::tuple, pop_to_mark()));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        std::vector<PickleValue> items(size_t(op - 0x84));
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(container(Kind::tuple, std::move(items)));
        return;
      }
      case 's': {
        std::vector<PickleValue> pair(2);
        pair[1] = pop();
        pair[0] = pop();
        extend(top(), std::move(pair), true);
        return;
      }
      case 'u': {
        std::vector<PickleValue> items = pop_to_mark();
        require_here(items.size() % 2 == 0, "SETITEMS with an odd number of values");
        extend(top(), std::move(items), true);
        return;
      }
      case 'a': {
        std::vector<PickleValue> item(1);
        item[0] = pop();
        extend(top(), std::move(item), false);
        return;
      }
      case 'e':
        extend_list_to_mark();
        return;
      case 'q':
        memo_put(little_endian(1));
        return;
      case 'r':
        memo_put(little_endian(4));
        return;
      case 0x94:
        memo_put(memo_.size());
        return;  // MEMOIZE
      case 'h':
        memo_get(little_endian(1));
        return;
      case 'j':
        memo_get(little_endian(4));
        return;
      case 'c': {
        const std::string module = line();
        const std::string name = line();
        push_global(module + "." + name);
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const PickleValue name = pop();
        const PickleValue module = pop();
        require_here(name.kind == Kind::string && module.kind == Kind::string,
                     "STACK_GLOBAL of non-strings");
        push_global(module.text + "." + name.text);
        return;
      }
      case 'Q':
        push_storage(pop());
        return;  // BINPERSID
      case 'R': {
        PickleValue arguments = pop();
        const PickleValue callable = pop();
        reduce(callable, std::move(arguments));
        return;
      }
      default:
        require_here(false, "unsupported opcode 0x{:02x}", op);
    }
  }

  void extend_list_to_mark() {
    std::vector<PickleValue> items = pop_to_mark();
    extend(top(), std::move(items), false);
  }

  void memo_put(uint64_t key) {
    PickleValue copy = top();
    spent_ += copy.nodes;
    require_here(spent_ <= kMaxPickleNodes, "more than {} values made or copied", kMaxPickleNodes);
    memo_[key] = std::move(copy);
  }
  void memo_get(uint64_t key) {
    const auto it = memo_.find(key);
    require_here(it != memo_.end(), "memo entry {} was never stored", key);
    push(it->second);
  }

  void push_global(const std::string& name) {
    DType dtype;
    require_here(
        name == "torch._utils._rebuild_tensor_v2" || name == "collections.OrderedDict" ||
            storage_dtype(name, &dtype),
        "refuses global {} (only tensors rebuilt from storages, dicts, ints, floats and strings "
        "are read)",
        name);
    PickleValue value = scalar(Kind::global_name);
    value.text = name;
    value.nodes += name.size() / 64;
    push(std::move(value));
  }

  // A persistent id: ('storage', storage class, key, location, numel).
  void push_storage(const PickleValue& id) {
    const auto& items = id.items;
    DType dtype;
    require_here(
        id.kind == Kind::tuple && items.size() == 5 && items[0].kind == Kind::string &&
            items[0].text == "storage" && items[1].kind == Kind::global_name &&
            storage_dtype(items[1].text, &dtype) && items[2].kind == Kind::string &&
            items[3].kind == Kind::string && items[4].kind == Kind::integer &&
            items[4].integer >= 0,
        "a persistent id other than ('storage', torch.<type>Storage, key, location, numel)");
    auto& cached = storages_[items[2].text];
    if (!cached) cached = load_storage_(items[2].text, dtype, items[4].integer);
    require_here(cached->dtype == dtype && cached->elements == items[4].integer,
                 "storage {} is named with two types or sizes", items[2].text);
    PickleValue value = scalar(Kind::storage);
    value.storage_ref = cached;
    push(std::move(value));
  }

  void reduce(const PickleValue& callable, PickleValue arguments) {
    require_here(callable.kind == Kind::global_name && arguments.kind == Kind::tuple,
                 "REDUCE of a {} (only the allowed globals are called)", kind_name(callable.kind));
    if (callable.text == "collections.OrderedDict") {
      require_here(arguments.items.empty(),
                   "OrderedDict with arguments (only an empty one is read)");
      push(scalar(Kind::dict));
      return;
    }
    require_here(callable.text == "torch._utils._rebuild_tensor_v2",
                 "calls {} (not a tensor rebuild)", callable.text);
    push(rebuild_tensor(arguments.items));
  }

  std::vector<int64_t> dims(const PickleValue& tuple, const char* what) {
    require_here(tuple.kind == Kind::tuple && tuple.items.size() <= size_t(kMaxTensorDims),
                 "tensor {} is not a tuple of at most {} ints", what, kMaxTensorDims);
    std::vector<int64_t> values;
    for (const PickleValue& item : tuple.items) {
      require_here(
          item.kind == Kind::integer && item.integer >= 0 && item.integer <= (int64_t(1) << 40),
          "tensor {} holds a value outside 0..2^40", what);
      values.push_back(item.integer);
    }
    return values;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[,
  // metadata])
  PickleValue rebuild_tensor(const std::vector<PickleValue>& args) {
    require_here((args.size() == 6 || args.size() == 7) && args[0].kind == Kind::storage &&
                     args[1].kind == Kind::integer && args[4].kind == Kind::boolean &&
                     args[5].kind == Kind::dict && args[5].items.empty() &&
                     (args.size() == 6 || args[6].kind == Kind::none),
                 "_rebuild_tensor_v2 with other arguments than (storage, offset, size, stride, "
                 "requires_grad, empty hooks)");
    auto tensor = std::make_shared<TorchTensor>();
    tensor->storage = args[0].storage_ref;
    tensor->offset = args[1].integer;
    tensor->shape = dims(args[2], "size");
    tensor->strides = dims(args[3], "stride");
    require_here(tensor->shape.size() == tensor->strides.size(),
                 "tensor size and stride differ in length");
    require_here(tensor->offset >= 0, "tensor offset {} is negative", tensor->offset);
    // Every element read must lie inside the storage, and there are no more elements than it holds.
    int64_t count = 1;
    int64_t last = tensor->offset;
    for (size_t i = 0; i < tensor->shape.size(); ++i) {
      int64_t reach = 0;
      require_here(
          !__builtin_mul_overflow(count, tensor->shape[i], &count) &&
              (tensor->shape[i] == 0 ||
               (!__builtin_mul_overflow(tensor->shape[i] - 1, tensor->strides[i], &reach) &&
                !__builtin_add_overflow(last, reach, &last))),
          "tensor of size {} overflows", shape_to_string(tensor->shape));
    }
    require_here(
        count <= tensor->storage->elements && (count == 0 || last < tensor->storage->elements),
        "tensor of size {} and stride {} at offset {} reads past its storage of {} elements",
        shape_to_string(tensor->shape), shape_to_string(tensor->strides), tensor->offset,
        tensor->storage->elements);
    PickleValue value = scalar(Kind::tensor);
    value.tensor = std::move(tensor);
    return value;
  }

  void check_plain(const PickleValue& value, int depth) {
    require_here(value.kind != Kind::global_name && value.kind != Kind::storage,
                 "the result holds a {} outside a tensor", kind_name(value.kind));
    require_here(depth <= kMaxPickleDepth, "nesting deeper than {}", kMaxPickleDepth);
    for (const PickleValue& item : value.items) check_plain(item, depth + 1);
  }

  std::span<const std::byte> input_;
  const TorchStorageLoader& load_storage_;
  const std::string& context_;
  size_t position_ = 0;
  size_t opcode_at_ = 0;
  size_t spent_ = 0;
  std::vector<PickleValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue> memo_;
  std::unordered_map<std::string, std::shared_ptr<const TorchStorage>> storages_;
};

float element_as_float(const TorchStorage& storage, int64_t index) {
  const std::byte* at = storage.bytes.data() + size_t(index) * dtype_size_bytes(storage.dtype);
  switch (storage.dtype) {
    case DType::f64: {
      double value;
      std::memcpy(&value, at, sizeof(value));
      return float(value);
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t bits;
      std::memcpy(&bits, at, sizeof(bits));
      return storage.dtype == DType::f16 ? fp16_to_float(bits) : bf16_to_float(bits);
    }
    default: {
      float value;
      std::memcpy(&value, at, sizeof(value));
      return value;
    }
  }
}

}  // namespace

std::string_view kind_name(PickleValue::Kind kind) {
  switch (kind) {
    case Kind::none:
      return "None";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::real:
      return "float";
    case Kind::string:
      return "str";
    case Kind::tuple:
      return "tuple";
    case Kind::list:
      return "list";
    case Kind::dict:
      return "dict";
    case Kind::tensor:
      return "tensor";
    case Kind::global_name:
      return "global";
    case Kind::storage:
      return "storage";
  }
  return "?";
}

const PickleValue* PickleValue::find(std::string_view key) const {
  const PickleValue* found = nullptr;
  if (kind != Kind::dict) return nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].kind == Kind::string && items[i].text == key) found = &items[i + 1];
  }
  return found;
}

int64_t TorchTensor::numel() const {
  int64_t count = 1;
  for (const int64_t d : shape) count *= d;
  return count;
}

std::vector<float> TorchTensor::to_float_vector() const {
  const int64_t count = numel();
  std::vector<float> values(static_cast<size_t>(count));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t element = offset;
    for (size_t d = 0; d < shape.size(); ++d) element += index[d] * strides[d];
    values[size_t(i)] = element_as_float(*storage, element);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return values;
}

PickleValue read_torch_pickle(std::span<const std::byte> pickle,
                              const TorchStorageLoader& load_storage, const std::string& context) {
  return Unpickler(pickle, load_storage, context).run();
}

}  // namespace oscar
