// chat.c — the chat template families seam writes, and telling which one a
// GGUF's template is.
#include "text/chat.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const chat_template CHAT_CONTINUATION = {"continuation", "", "", "\n"};

// ChatML (Qwen 2 and 3): <|im_start|>user / assistant ... <|im_end|>
static const chat_template CHATML = {"chatml", "<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n", "\n"};
// Gemma: <start_of_turn>user / model ... <end_of_turn>
static const chat_template GEMMA = {"gemma", "<start_of_turn>user\n", "<end_of_turn>\n<start_of_turn>model\n", "\n"};
// Llama 3: a header opens each turn and <|eot_id|> closes it, with nothing
// between turns
static const chat_template LLAMA3 = {"llama3", "<|start_header_id|>user<|end_header_id|>\n\n",
                                     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", ""};

// The families in llama.cpp's order of detection, up to the last one seam
// writes: a template is the first family whose markers it all contains.
// The families seam does not write (tpl NULL) are here so that their
// templates are named, and not taken for a later family's that they also
// mention (phi-4's has ChatML's <|im_start|>).
static const struct {
    const char *marker[3];  // NULL-padded
    const char *family;
    const chat_template *tpl;
} FAMILIES[] = {
    {{"<|im_start|>", "<|im_sep|>"}, "phi-4", NULL},
    {{"<|im_start|>", "<end_of_utterance>"}, "SmolVLM", NULL},
    {{"<|im_start|>"}, "ChatML", &CHATML},
    {{"[INST]"}, "Llama 2 or Mistral ([INST])", NULL},
    {{"<|assistant|>", "<|end|>"}, "phi-3", NULL},
    {{"[gMASK]<sop>"}, "ChatGLM 4", NULL},
    {{"<|assistant|>", "<|user|>"}, "Falcon 3 or GLM-Edge", NULL},
    {{"<|{{ item['role'] }}|>", "<|begin_of_image|>"}, "GLM-Edge", NULL},
    {{"<|user|>", "<|endoftext|>"}, "Zephyr", NULL},
    {{"bos_token + message['role']"}, "Monarch", NULL},
    {{"<start_of_turn>"}, "Gemma", &GEMMA},
    {{"'\\n\\nAssistant: ' + eos_token"}, "Orion", NULL},
    {{"GPT4 Correct "}, "OpenChat", NULL},
    {{"USER: ", "ASSISTANT: "}, "Vicuna", NULL},
    {{"### Instruction:", "<|EOT|>"}, "DeepSeek Coder", NULL},
    {{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}, "Command R", NULL},
    {{"<|start_header_id|>", "<|end_header_id|>"}, "Llama 3", &LLAMA3},
};

static bool contains_all(const char *s, size_t n, const char *const marker[3]) {
    for (int i = 0; i < 3 && marker[i]; i++)
        if (!memmem(s, n, marker[i], strlen(marker[i]))) return false;
    return true;
}

// The first characters of s on one line, escapes for line breaks and
// quotes, cut between UTF-8 characters.
static void quote_head(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0, i = 0;
    for (; i < n && k + 8 < cap; i++) {
        const char c = s[i], *esc = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '"' ? "\\\"" : NULL;
        if (esc) k += (size_t)snprintf(out + k, cap - k, "%s", esc);
        else out[k++] = c;
    }
    if (i < n) {
        // mid-character: drop its bytes so far (copied as they are, one for one)
        for (; i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80; i--) k--;
        k += (size_t)snprintf(out + k, cap - k, "...");
    }
    out[k] = '\0';
}

int chat_template_detect(const char *tmpl, size_t len, const chat_template **out, seam_error *e) {
    static const chat_template *const WRITTEN[] = {&CHATML, &GEMMA, &LLAMA3};
    *out = NULL;
    for (size_t i = 0; i < sizeof WRITTEN / sizeof *WRITTEN; i++) {
        if (strlen(WRITTEN[i]->name) == len && memcmp(WRITTEN[i]->name, tmpl, len) == 0) {
            *out = WRITTEN[i];
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++) {
        if (!contains_all(tmpl, len, FAMILIES[i].marker)) continue;
        if (!FAMILIES[i].tpl)
            return seam_fail(e, "tokenizer.chat_template: a %s template; seam writes ChatML, Gemma and Llama 3 turns only",
                             FAMILIES[i].family);
        *out = FAMILIES[i].tpl;
        return 0;
    }
    char head[64];
    quote_head(tmpl, len, head, sizeof head);
    return seam_fail(e, "tokenizer.chat_template: not a template seam recognises (it knows ChatML, Gemma and Llama 3 "
                     "by their markers): \"%s\"", head);
}

int chat_template_load(const gguf_file *f, const chat_template **out, seam_error *e) {
    static const char KEY[] = "tokenizer.chat_template";
    gguf_str s = {0, ""};
    *out = NULL;
    if (gguf_find_kv(f, KEY) && gguf_get_str(f, KEY, &s, e)) return -1;
    return s.len ? chat_template_detect(s.ptr, s.len, out, e) : 0;  // an empty template is none
}
