// chat.h — chat templates: how a conversation's turns are written for the
// model, from the template its GGUF carries.
//
// An instruction-tuned model's file holds its chat template as a Jinja
// program (tokenizer.chat_template). seam runs no template engine: as
// llama.cpp's llm_chat_detect_template does, it tells a template's family by
// the markers in its text and writes turns in that family's fixed form. A
// base model's file has no template: the model continues text; it does not
// answer.
#ifndef SEAM_CHAT_H
#define SEAM_CHAT_H

#include <stddef.h>

#include "base/common.h"
#include "format/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

// One exchange as the model was trained to see it:
//   user_prefix TEXT user_suffix REPLY <its end-of-turn token> turn_end
typedef struct {
    const char *name;         // llama.cpp's name of the family: "chatml", "gemma", "llama3"
    const char *user_prefix;  // before the user's text
    const char *user_suffix;  // after it: closes the user's turn and opens the model's
    const char *turn_end;     // after the model's end token, before the next user turn
} chat_template;

// For a file without a template: each line is text for the model to
// continue, and a newline follows what it wrote.
extern const chat_template CHAT_CONTINUATION;

// The family of template text tmpl (len bytes, not NUL-terminated), or its
// name alone ("chatml", as llama.cpp also accepts). -1 with e filled when
// seam does not write turns of that family: e names the family when it is
// one llama.cpp knows, else quotes the template's first characters.
int chat_template_detect(const char *tmpl, size_t len, const chat_template **out, seam_error *e);

// The template of f (tokenizer.chat_template): *out is NULL when f has none.
int chat_template_load(const gguf_file *f, const chat_template **out, seam_error *e);

#ifdef __cplusplus
}
#endif
#endif
