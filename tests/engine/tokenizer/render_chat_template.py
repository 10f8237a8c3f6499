#!/usr/bin/env python3
"""Renders a model's Jinja chat template (tokenizer_config.json "chat_template") for test cases,
the way Hugging Face transformers' apply_chat_template does (sandboxed Jinja2, trim_blocks,
lstrip_blocks, loopcontrols, tojson, the special tokens as variables).

  render_chat_template.py TOKENIZER_CONFIG.json CASES.json OUT.json
CASES.json: [{"messages": [{"role", "content"}...], "add_generation_prompt": bool,
              "enable_thinking": bool (optional)}...]; OUT.json: the rendered strings, in order.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def main(config_path, cases_path, out_path):
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(config["chat_template"])
    special = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")
               if isinstance(config.get(k), str)}
    rendered = []
    for case in cases:
        kwargs = dict(special)
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        rendered.append(template.render(messages=case["messages"],
                                        add_generation_prompt=case["add_generation_prompt"],
                                        **kwargs))
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(rendered, f, ensure_ascii=False)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
