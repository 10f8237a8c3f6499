// `gpufrac serve`: one model behind an OpenAI-compatible HTTP API, on the built-in engine.
#pragma once

namespace gpufrac {

int serve_command(int argc, char** argv);

}  // namespace gpufrac
