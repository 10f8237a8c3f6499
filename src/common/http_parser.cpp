#include "common/http_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace gpufrac {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim_ows(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

std::string_view HttpHead::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return {};
}

bool HttpHead::keep_alive() const {
  std::string connection = lower(header("connection"));
  if (connection.find("close") != std::string::npos) return false;
  if (version_minor == 0) return connection.find("keep-alive") != std::string::npos;
  return true;
}

HttpParser::HttpParser(Kind kind, size_t max_head_bytes, uint64_t max_body_bytes)
    : kind_(kind), max_head_bytes_(max_head_bytes), max_body_bytes_(max_body_bytes) {}

void HttpParser::reset() {
  state_ = State::kHead;
  error_ = Error::kNone;
  head_ = HttpHead();
  head_buffer_.clear();
  no_body_ = false;
  framing_ = Framing::kLength;
  remaining_ = 0;
  body_received_ = 0;
  chunk_state_ = ChunkState::kSize;
  chunk_line_.clear();
}

void HttpParser::fail(Error error) {
  state_ = State::kError;
  error_ = error;
}

std::string_view HttpParser::error_text() const {
  switch (error_) {
    case Error::kNone: return "";
    case Error::kMalformed: return "malformed HTTP message";
    case Error::kHeadTooLarge: return "HTTP head too large";
    case Error::kBodyTooLarge: return "HTTP body too large";
    case Error::kUnsupported: return "unsupported HTTP framing";
  }
  return "";
}

size_t HttpParser::feed(std::string_view data, std::string& body_out) {
  size_t used = 0;
  while (used < data.size() && state_ != State::kDone && state_ != State::kError) {
    std::string_view rest = data.substr(used);
    if (state_ == State::kHead) {
      used += parse_head(rest);
      continue;
    }
    // kBody
    if (framing_ == Framing::kChunked) {
      used += parse_chunked(rest, body_out);
      continue;
    }
    size_t take = rest.size();
    if (framing_ == Framing::kLength) take = size_t(std::min<uint64_t>(take, remaining_));
    if (framing_ == Framing::kUntilClose && body_received_ + take > max_body_bytes_) {
      fail(Error::kBodyTooLarge);
      break;
    }
    body_out.append(rest.substr(0, take));
    body_received_ += take;
    used += take;
    if (framing_ == Framing::kLength) {
      remaining_ -= take;
      if (remaining_ == 0) state_ = State::kDone;
    }
  }
  return used;
}

size_t HttpParser::parse_head(std::string_view data) {
  // Look for the blank line, allowing it to straddle what we buffered and the new bytes.
  size_t old_size = head_buffer_.size();
  size_t scan_from = old_size >= 3 ? old_size - 3 : 0;
  head_buffer_.append(data);
  size_t end = head_buffer_.find("\r\n\r\n", scan_from);
  size_t terminator = 4;
  if (end == std::string::npos) {
    size_t lf_end = head_buffer_.find("\n\n", scan_from);  // tolerate bare LF
    if (lf_end != std::string::npos) {
      end = lf_end;
      terminator = 2;
    }
  }
  if (end == std::string::npos) {
    if (head_buffer_.size() > max_head_bytes_) fail(Error::kHeadTooLarge);
    return data.size();
  }
  if (end > max_head_bytes_) {
    fail(Error::kHeadTooLarge);
    return data.size();
  }
  size_t consumed = end + terminator - old_size;
  std::string_view head(head_buffer_.data(), end);
  size_t line_end = head.find('\n');
  std::string_view start = head.substr(0, line_end);
  if (!parse_start_line(trim_ows(start))) {
    fail(Error::kMalformed);
    return consumed;
  }
  std::string_view rest = line_end == std::string_view::npos ? "" : head.substr(line_end + 1);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? "" : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      fail(Error::kMalformed);
      return consumed;
    }
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) {
      fail(Error::kMalformed);
      return consumed;
    }
    head_.headers.emplace_back(lower(name), std::string(trim_ows(line.substr(colon + 1))));
  }
  head_buffer_.clear();
  if (start_body()) state_ = State::kBody;
  return consumed;
}

bool HttpParser::parse_start_line(std::string_view line) {
  auto parse_version = [this](std::string_view v) {
    if (v == "HTTP/1.1") head_.version_minor = 1;
    else if (v == "HTTP/1.0") head_.version_minor = 0;
    else return false;
    return true;
  };
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return false;
  if (kind_ == Kind::kRequest) {
    size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) return false;
    head_.method = std::string(line.substr(0, sp1));
    head_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    if (head_.method.empty() || head_.target.empty() || head_.target[0] != '/') return false;
    if (!std::all_of(head_.method.begin(), head_.method.end(), is_token_char)) return false;
    head_.path = head_.target.substr(0, head_.target.find('?'));
    return parse_version(line.substr(sp2 + 1));
  }
  if (!parse_version(line.substr(0, sp1))) return false;
  std::string_view rest = line.substr(sp1 + 1);
  std::string_view code = rest.substr(0, rest.find(' '));
  auto [ptr, ec] = std::from_chars(code.data(), code.data() + code.size(), head_.status);
  if (ec != std::errc() || ptr != code.data() + code.size() || head_.status < 100 ||
      head_.status > 999) {
    return false;
  }
  head_.reason = code.size() < rest.size() ? std::string(rest.substr(code.size() + 1)) : "";
  return true;
}

bool HttpParser::start_body() {
  bool bodyless_response = kind_ == Kind::kResponse &&
                           (no_body_ || head_.status / 100 == 1 || head_.status == 204 ||
                            head_.status == 304);
  if (bodyless_response) {
    state_ = State::kDone;
    return false;
  }
  std::string encoding = lower(head_.header("transfer-encoding"));
  std::string_view length = head_.header("content-length");
  if (!encoding.empty()) {
    if (encoding != "chunked") {
      fail(Error::kUnsupported);
      return false;
    }
    framing_ = Framing::kChunked;
    return true;
  }
  if (!length.empty()) {
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    if (ec != std::errc() || ptr != length.data() + length.size()) {
      fail(Error::kMalformed);
      return false;
    }
    if (n > max_body_bytes_) {
      fail(Error::kBodyTooLarge);
      return false;
    }
    framing_ = Framing::kLength;
    remaining_ = n;
    if (n == 0) {
      state_ = State::kDone;
      return false;
    }
    return true;
  }
  if (kind_ == Kind::kRequest) {  // a request without framing has no body
    state_ = State::kDone;
    return false;
  }
  framing_ = Framing::kUntilClose;
  return true;
}

size_t HttpParser::parse_chunked(std::string_view data, std::string& body_out) {
  size_t used = 0;
  while (used < data.size() && state_ == State::kBody) {
    std::string_view rest = data.substr(used);
    if (chunk_state_ == ChunkState::kData) {
      size_t take = size_t(std::min<uint64_t>(rest.size(), remaining_));
      body_out.append(rest.substr(0, take));
      used += take;
      remaining_ -= take;
      if (remaining_ == 0) chunk_state_ = ChunkState::kDataEnd;
      continue;
    }
    // Line-oriented states: size line, CRLF after data, trailer lines.
    size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      chunk_line_.append(rest);
      if (chunk_line_.size() > 4096) fail(Error::kMalformed);
      return used + rest.size();
    }
    chunk_line_.append(rest.substr(0, nl));
    used += nl + 1;
    std::string line = std::move(chunk_line_);
    chunk_line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (chunk_state_ == ChunkState::kDataEnd) {
      if (!line.empty()) fail(Error::kMalformed);
      chunk_state_ = ChunkState::kSize;
    } else if (chunk_state_ == ChunkState::kSize) {
      std::string_view hex = std::string_view(line).substr(0, line.find(';'));
      hex = trim_ows(hex);
      uint64_t size = 0;
      auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
      if (hex.empty() || ec != std::errc() || ptr != hex.data() + hex.size()) {
        fail(Error::kMalformed);
      } else if (body_received_ + size > max_body_bytes_) {
        fail(Error::kBodyTooLarge);
      } else if (size == 0) {
        chunk_state_ = ChunkState::kTrailer;
      } else {
        body_received_ += size;
        remaining_ = size;
        chunk_state_ = ChunkState::kData;
      }
    } else if (line.empty()) {  // kTrailer: a blank line ends the message
      state_ = State::kDone;
    }
  }
  return used;
}

bool HttpParser::finish_on_eof() {
  if (state_ == State::kBody && framing_ == Framing::kUntilClose) {
    state_ = State::kDone;
    return true;
  }
  return state_ == State::kDone;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

}  // namespace gpufrac
