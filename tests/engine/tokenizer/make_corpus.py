#!/usr/bin/env python3
"""Writes the tokenizer test corpus, deterministically (a fixed seed; same bytes on every run).

  make_corpus.py corpus OUT.jsonl [--min-bytes N]
      One JSON string per line: mixed text in many scripts, code, emoji (ZWJ sequences, flags,
      skin tones), whitespace runs, numbers in several digit systems, contractions, added-token
      text, NFC-sensitive sequences (decomposed accents, Hangul jamo, unordered marks), long
      words and random assigned code points. At least N bytes of UTF-8 (default 1.2 MB).
  make_corpus.py nfc OUT.jsonl
      One JSON array [input, NFC(input)] per line, NFC by python3's unicodedata: every code
      point with a canonical decomposition, plus random runs of starters, marks and jamo.

Characters where the JavaScript reference (transformers.js) knowingly differs from Hugging Face
tokenizers are left out of the corpus (docs/tokenizer.md): U+0085 and U+FEFF (JavaScript's \\s
differs from Unicode White_Space) and U+017F (long s, which (?i) folds to 's' in Oniguruma).
"""
import json
import random
import sys
import unicodedata as ud

JS_DIVERGENT = {0x85, 0xFEFF, 0x17F}

WORDS = {
    "en": "the quick brown fox jumps over lazy dog tokenizer model server request latency "
          "throughput memory fraction compute schedule batch prompt answer question hello world "
          "because however therefore information international understanding".split(),
    "fr": "être où déjà garçon français élève naïve cœur Noël à côté forêt hôpital crème brûlée "
          "ça août Œuvre".split(),
    "de": "Straße Mädchen über Größe schön Fußgängerübergang Äpfel Öl Übermut heißen".split(),
    "es": "niño señor corazón mañana pingüino acción ¿qué ¡hola canción último".split(),
    "vi": "Tiếng Việt người được không những trường hợp đường phố quốc gia".split(),
    "tr": "İstanbul ığdır şehir çocuk güneş öğretmen Iğdır dağ".split(),
    "ru": "привет мир язык модель сервер память Ёжик съешь щи объём".split(),
    "el": "γλώσσα καλημέρα Ελλάδα ψυχή ἀρχή ὁ λόγος ΣΊΣΥΦΟΣ".split(),
    "ar": "مرحبا بالعالم اللغة العربية نموذج ذكاء اصطناعي كِتَابٌ".split(),
    "he": "שלום עולם שָׁלוֹם מודל שפה".split(),
    "hi": "नमस्ते दुनिया भाषा मॉडल हिन्दी क्षत्रिय ज़िंदगी".split(),
    "th": "สวัสดี ภาษาไทย โมเดล คอมพิวเตอร์ น้ำ".split(),
    "zh": "你好 世界 语言模型 服务器 内存 计算 中华人民共和国 繁體中文 龍".split(),
    "ja": "こんにちは 世界 カタカナ ひらがな 日本語 東京 ｶﾀｶﾅ ー".split(),
    "ko": "안녕하세요 세계 한국어 모델 서버 똠방각하".split(),
    "misc": "ﬁ ﬀ Å ℃ № ™ ½ ² ³ µ ǅ ǈ Ⅻ ⅷ ㊿ ① ⑳".split(),
}
PUNCT = list(".,;:!?…—–-()[]{}<>\"'«»“”‘’„·•/\\|@#$%^&*_=+~`") + ["。", "、", "！", "？", "：", "；"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2009", "\u200b",
          "\v", "\f", "   \t ", "\n\n\n", " \r\n ", "\u2028", "\u202f"]
EMOJI = ["😀", "😂", "🤖", "🚀", "❤️", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "🇯🇵",
         "🇺🇸", "#️⃣", "1️⃣", "✅", "⚡", "🧑🏿‍🔬", "🫠", "🥲", "☕", "🐍", "∑", "∞", "≈"]
DIGIT_SETS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "０１２３４５６７８９",
              "๐๑๒๓๔๕๖๗๘๙", "〇一二三四五六七八九"]
CONTRACTIONS = ["don't", "I'M", "they'RE", "we'll", "she'd", "it's", "You'Ve", "O'Reilly",
                "rock'n'roll", "'tis", "'S", "'LL", "ain't", "y'all", "l'été", "'2024"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
           "<|im_sta", "<|im_start|", "<<|im_end|>>", "<|begin_of_text|>", "<|eot_id|>",
           "<|start_header_id|>", "<|fim_prefix|>"]
# NFC-sensitive: decomposed, reordered, singletons, exclusions, jamo.
NFC_BITS = ["e\u0301", "A\u030a", "a\u0323\u0302", "a\u0302\u0323", "\u1100\u1161\u11a8",
            "\u1112\u1161\u11ab", "\u2126", "\u212b", "\u0958", "\u0b47\u0b3e", "o\u0308\u0304",
            "\u0041\u0300\u0316", "\u00e9\u0301", "\u0915\u093c", "q\u0307\u0323", "\u1e9b\u0323",
            "\u05e9\u05bc\u05c1", "\uac00\u11a8", "\u0301start"]
CODE = [
    "def encode(self, text: str) -> list[int]:\n    ids = []\n    for piece in self.split(text):\n"
    "        ids.extend(self.bpe(piece))\n    return ids\n",
    "int main(int argc, char** argv) {\n\tstd::vector<int32_t> v{1, 2, 3};\n\tfor (auto& x : v) "
    "x *= 2;\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    "const f = async (x) => { await fetch(`/v1/chat/completions?id=${x}`); return x ?? null; };\n",
    '{"model": "qwen3-4b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 128}',
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;\n",
    "for i in $(seq 1 10); do echo \"run $i\" >> /tmp/log.txt 2>&1; done\n",
    "    if (x != y && z <= 0x7FFF) {\n        return -1;\n    }\n\n\n",
    "#include <cstdio>\r\nint x=0x1F; // comment\r\n",
    "    \t  mixed_indent = [  1,\t2 ,3  ]  \n",
    "a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m&=n;o|=p;q^=r;",
    "<div class=\"x\">&nbsp;&amp;&lt;</div>\n<!-- comment -->\n",
]


def assigned_sample_pool():
    """Assigned code points by broad category, excluding surrogates, private use, noncharacters,
    unassigned and the JS-divergent three."""
    pool = {"L": [], "M": [], "N": [], "P": [], "S": [], "Z": [], "C": []}
    for cp in range(0x110000):
        if cp in JS_DIVERGENT:
            continue
        cat = ud.category(chr(cp))
        if cat in ("Cs", "Co", "Cn"):
            continue
        pool[cat[0]].append(cp)
    return pool


def number(rng):
    kind = rng.randrange(8)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 15)))
    if kind == 1:
        return "%.*f" % (rng.randrange(1, 6), rng.uniform(-1e6, 1e6))
    if kind == 2:
        return "{:,}".format(rng.randrange(10 ** 9))
    if kind == 3:
        return "%de-%d" % (rng.randrange(1, 10), rng.randrange(1, 30))
    if kind == 4:
        digits = rng.choice(DIGIT_SETS)
        return "".join(rng.choice(digits) for _ in range(rng.randrange(1, 9)))
    if kind == 5:
        return "%04d-%02d-%02d %02d:%02d" % (rng.randrange(1900, 2100), rng.randrange(1, 13),
                                             rng.randrange(1, 29), rng.randrange(24), rng.randrange(60))
    if kind == 6:
        return "+1 (%03d) %03d-%04d" % (rng.randrange(1000), rng.randrange(1000), rng.randrange(10000))
    return rng.choice(["½", "¾", "²", "³", "Ⅻ", "ⅷ", "①", "⑳", "𝟙𝟚𝟛", "١٢٣", "12³"])


def random_chars(rng, pool, n):
    cats = ["L"] * 5 + ["M", "N", "P", "S", "Z", "C"]
    return "".join(chr(rng.choice(pool[rng.choice(cats)])) for _ in range(n))


def record(rng, pool):
    parts = []
    kind = rng.randrange(10)
    target = rng.randrange(40, 900)
    size = 0
    while size < target:
        r = rng.random()
        if kind == 0 and r < 0.6:
            part = rng.choice(CODE)
        elif kind == 1 and r < 0.5:
            part = random_chars(rng, pool, rng.randrange(1, 12))
        elif r < 0.45:
            lang = rng.choice(list(WORDS))
            part = rng.choice(WORDS[lang])
            if rng.random() < 0.1:
                part = part.upper() if rng.random() < 0.5 else part.capitalize()
        elif r < 0.62:
            part = rng.choice(SPACES)
        elif r < 0.70:
            part = number(rng)
        elif r < 0.77:
            part = "".join(rng.choice(PUNCT) for _ in range(rng.randrange(1, 4)))
        elif r < 0.83:
            part = "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4)))
        elif r < 0.87:
            part = rng.choice(CONTRACTIONS)
        elif r < 0.90:
            part = rng.choice(SPECIAL)
        elif r < 0.93:
            part = rng.choice(NFC_BITS)
        elif r < 0.932:
            # Long runs: words longer than the BPE word cache holds (256 bytes).
            alphabet = rng.choice(["abcdefghij", "абвгд", "漢字仮名", "0123456789", "=-_*#", " \t"])
            part = "".join(rng.choice(alphabet) for _ in range(rng.randrange(50, 600)))
        else:
            part = random_chars(rng, pool, rng.randrange(1, 6))
        if r < 0.62 and rng.random() < 0.6:
            part = " " + part
        parts.append(part)
        size += len(part.encode("utf-8"))
    return "".join(parts)


def write_corpus(path, min_bytes):
    rng = random.Random(20261129)
    pool = assigned_sample_pool()
    total = 0
    with open(path, "w", encoding="utf-8") as f:
        # Fixed edge cases first, so a failure in them is easy to find.
        fixed = ["", " ", "\n", "a", "'s", "  leading", "trailing  ", "\r\n\r\n", "x \n y",
                 "Hello, world!", "1234567", "  \t\n  \t", "😀", "<|im_start|>user\nhi<|im_end|>\n"]
        fixed += [p for p in SPECIAL + NFC_BITS + CONTRACTIONS + SPACES]
        for text in fixed:
            f.write(json.dumps(text, ensure_ascii=False) + "\n")
            total += len(text.encode("utf-8"))
        while total < min_bytes:
            text = record(rng, pool)
            f.write(json.dumps(text, ensure_ascii=False) + "\n")
            total += len(text.encode("utf-8"))
    return total


def write_nfc_cases(path):
    rng = random.Random(15)
    decomposable = [cp for cp in range(0x110000)
                    if not 0xD800 <= cp <= 0xDFFF and ud.decomposition(chr(cp))
                    and not ud.decomposition(chr(cp)).startswith("<")]
    marks = [cp for cp in range(0x300, 0x2000) if ud.combining(chr(cp))]
    starters = list("aeiouAEIOUnNcCsSzZ") + ["\u0b47", "\u0915", "\u05e9", "\u1100", "\uac00"]
    jamo = [chr(c) for c in list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) +
            list(range(0x11a8, 0x11c3))]
    with open(path, "w", encoding="utf-8") as f:
        for cp in decomposable:
            s = chr(cp)
            f.write(json.dumps([s, ud.normalize("NFC", s)], ensure_ascii=False) + "\n")
            d = ud.normalize("NFD", s)
            f.write(json.dumps([d, ud.normalize("NFC", d)], ensure_ascii=False) + "\n")
        for _ in range(20000):
            s = "".join(rng.choice([rng.choice(starters), chr(rng.choice(marks)), rng.choice(jamo),
                                    chr(rng.choice(decomposable))]) for _ in range(rng.randrange(1, 8)))
            f.write(json.dumps([s, ud.normalize("NFC", s)], ensure_ascii=False) + "\n")


def main(argv):
    if len(argv) >= 3 and argv[1] == "corpus":
        min_bytes = int(argv[argv.index("--min-bytes") + 1]) if "--min-bytes" in argv else 1_200_000
        total = write_corpus(argv[2], min_bytes)
        print("wrote %s: %d bytes of text" % (argv[2], total))
    elif len(argv) == 3 and argv[1] == "nfc":
        write_nfc_cases(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
