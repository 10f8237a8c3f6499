// Errors that end a command: a user's mistake (bad flag, bad spec field) or an environment
// problem (port taken, file missing). The message is one line that names the field and the fix;
// main() prints it as "gpufrac: <message>" and exits with the code. Request-level errors inside a
// server never use this: they become HTTP error bodies.
#pragma once

#include <stdexcept>
#include <string>

namespace gpufrac {

class UsageError : public std::runtime_error {  // exit code 2
 public:
  using std::runtime_error::runtime_error;
};

class RuntimeFailure : public std::runtime_error {  // exit code 1
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gpufrac
