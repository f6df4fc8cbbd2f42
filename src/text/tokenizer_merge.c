// tokenizer_merge.c — what both kinds of vocabulary build on: growable
// arrays, the string set that holds token texts and merges, and the merge
// engine that joins adjacent symbols best pair first (step 3 of encoding in
// tokenizer.c). It calls neither tokenizer.c nor tokenizer_bpe.c: they call
// it, each with its own rule for which pairs may merge.
#include "text/tokenizer_merge.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- helpers

int tk_grow(void *ptr, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *p;  // ptr is the address of some T *; copied, not cast, to stay clear of aliasing rules
    memcpy(&p, ptr, sizeof p);
    void *q = realloc(p, n * size);
    if (!q) return -1;
    memcpy(ptr, &q, sizeof q);
    *cap = n;
    return 0;
}

int tk_oom(seam_error *e) {
    return seam_fail(e, "tokenizer: out of memory");
}

int tk_push(tk_ids *v, int32_t id, seam_error *e) {
    if (TK_GROW(v->ids, v->cap, (size_t)v->n + 1)) return tk_oom(e);
    v->ids[v->n++] = id;
    return 0;
}

// ---------------------------------------------------------------- strset

static uint64_t hash_bytes(const char *p, size_t n) {  // FNV-1a
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

int tk_strset_init(tk_strset *s, uint32_t n) {
    uint32_t slots = 16;
    while (slots < 2 * (uint64_t)n) slots *= 2;
    s->start = malloc(((size_t)n + 1) * sizeof *s->start);
    s->slots = calloc(slots, sizeof *s->slots);
    s->mask = slots - 1;
    s->n = 0;
    if (!s->start || !s->slots) return -1;
    s->start[0] = 0;
    return 0;
}

void tk_strset_free(tk_strset *s) {
    free(s->bytes);
    free(s->start);
    free(s->slots);
}

// The slot of text p: the one holding it, or the empty one where it would go.
static uint32_t *strset_slot(const tk_strset *s, const char *p, size_t n) {
    for (uint64_t h = hash_bytes(p, n);; h++) {
        uint32_t *slot = &s->slots[h & s->mask];
        if (*slot == 0) return slot;
        uint32_t i = *slot - 1;
        if (tk_str_len(s, i) == n && memcmp(tk_str(s, i), p, n) == 0) return slot;
    }
}

int tk_strset_find(const tk_strset *s, const char *p, size_t n) {
    uint32_t slot = *strset_slot(s, p, n);
    return (int)slot - 1;
}

// Appends string number s->n and returns the number of the first string with
// the same text: itself, or an earlier duplicate (which keeps the slot).
int tk_strset_add(tk_strset *s, const char *p, size_t n) {
    size_t used = s->start[s->n];
    if (TK_GROW(s->bytes, s->cap, used + n + 1)) return -1;
    memcpy(s->bytes + used, p, n);
    s->bytes[used + n] = '\0';  // so that a text prints in a debugger; texts may hold NULs too
    s->start[s->n + 1] = used + n + 1;
    uint32_t *slot = strset_slot(s, p, n);
    if (*slot == 0) *slot = s->n + 1;
    s->n++;
    return (int)*slot - 1;
}

// ---------------------------------------------------------------- merging

static bool bigram_better(const tk_bigram *a, const tk_bigram *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static int heap_push(tk_work *w, tk_bigram b, seam_error *e) {
    if (TK_GROW(w->heap, w->cap_heap, w->n_heap + 1)) return tk_oom(e);
    size_t i = w->n_heap++;
    while (i > 0 && bigram_better(&b, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = b;
    return 0;
}

static tk_bigram heap_pop(tk_work *w) {
    tk_bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_better(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_better(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static int try_pair(const seam_tokenizer *t, tk_work *w, tk_pair_fn prio_of, int left, int right,
                    seam_error *e) {
    if (left < 0 || right < 0) return 0;
    tk_bigram b = {.left = left, .right = right, .size = w->sym[left].n + w->sym[right].n};
    int rc = prio_of(t, w, &w->sym[left], &w->sym[right], &b.prio, e);
    if (rc <= 0) return rc;
    return heap_push(w, b, e);
}

int tk_split_chars(tk_work *w, const char *text, size_t len, seam_error *e) {
    // UTF-8 lead byte -> character length, as llama.cpp reads it (no
    // validation: a stray byte is a character of its own, a truncated
    // sequence ends at the end of the text).
    static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    w->n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = lead_len[(uint8_t)text[off] >> 4];
        if (n > len - off) n = len - off;
        if (TK_GROW(w->sym, w->cap_sym, w->n_sym + 1)) return tk_oom(e);
        int i = (int)w->n_sym++;
        w->sym[i] = (tk_symbol){.text = text + off, .n = (int)n, .prev = i - 1, .next = i + 1};
        off += n;
    }
    if (w->n_sym > 0) w->sym[w->n_sym - 1].next = -1;
    return 0;
}

int tk_merge(const seam_tokenizer *t, tk_work *w, tk_pair_fn prio_of, seam_error *e) {
    w->n_heap = 0;
    for (int i = 1; i < (int)w->n_sym; i++)
        if (try_pair(t, w, prio_of, i - 1, i, e)) return -1;
    while (w->n_heap > 0) {
        tk_bigram b = heap_pop(w);
        tk_symbol *l = &w->sym[b.left], *r = &w->sym[b.right];
        // Symbols only grow, so a pair whose sizes no longer add up has been
        // overtaken by another merge.
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = b.left;
        if (try_pair(t, w, prio_of, l->prev, b.left, e) || try_pair(t, w, prio_of, b.left, l->next, e))
            return -1;
    }
    return 0;
}

void tk_work_free(tk_work *w) {
    free(w->sym);
    free(w->heap);
    free(w->buf);
    free(w->key);
    free(w->cp);
    free(w->flags);
    free(w->chunk);
    free(w->chunk2);
}

// ---------------------------------------------------------------- pieces

void tk_put(tk_piece *p, const void *bytes, size_t n) {
    if (p->n + n <= p->cap) memcpy(p->buf + p->n, bytes, n);
    p->n += n;
}
