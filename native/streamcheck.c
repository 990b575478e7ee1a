/* recio stream check: NOTE [whole-stream check] in streamcheck.h. */
#include "streamcheck.h"

#include <stdlib.h>
#include <unistd.h>

#include "crc32c.h"

void rc_checked_init(rc_checked *s) {
  pthread_mutex_init(&s->mu, NULL);
  s->slots = NULL;
  s->cap = s->n = 0;
}

void rc_checked_destroy(rc_checked *s) {
  free(s->slots);
  s->slots = NULL;
  s->cap = s->n = 0;
  pthread_mutex_destroy(&s->mu);
}

uint64_t rc_checked_key_of(uint32_t crc, size_t len) {
  const uint64_t key = (uint64_t)crc << 32 | (uint32_t)len;
  return key ? key : 1;
}

uint64_t rc_checked_key(const uint8_t *data, size_t len) {
  return rc_checked_key_of(rc_crc32c(0, data, len), len);
}

static size_t slot_of(uint64_t key, size_t cap) {
  return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* (mutex held) */
static int find(const rc_checked *s, uint64_t key) {
  if (!s->cap) return 0;
  for (size_t i = slot_of(key, s->cap);; i = (i + 1) & (s->cap - 1)) {
    if (s->slots[i] == key) return 1;
    if (!s->slots[i]) return 0;
  }
}

int rc_checked_has(rc_checked *s, uint64_t key) {
  pthread_mutex_lock(&s->mu);
  const int found = find(s, key);
  pthread_mutex_unlock(&s->mu);
  return found;
}

static void put(uint64_t *slots, size_t cap, uint64_t key) {
  size_t i = slot_of(key, cap);
  while (slots[i]) i = (i + 1) & (cap - 1);
  slots[i] = key;
}

void rc_checked_add(rc_checked *s, uint64_t key) {
  pthread_mutex_lock(&s->mu);
  if (!find(s, key)) {
    if (2 * (s->n + 1) > s->cap) { /* at most half full */
      const size_t cap = s->cap ? 2 * s->cap : 1024;
      uint64_t *slots = calloc(cap, sizeof *slots);
      if (!slots) {
        pthread_mutex_unlock(&s->mu);
        return;
      }
      for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i]) put(slots, cap, s->slots[i]);
      free(s->slots);
      s->slots = slots;
      s->cap = cap;
    }
    put(s->slots, s->cap, key);
    s->n++;
  }
  pthread_mutex_unlock(&s->mu);
}

static rc_checked process_set;
static pid_t process_pid; /* 0: not made yet */

rc_checked *rc_checked_process(void) {
  const pid_t pid = getpid();
  if (process_pid != pid) {
    /* first use, or the first in a forked child: the parent's table is left as it is (it may
     * have been mid-resize), a new one starts empty */
    rc_checked_init(&process_set);
    process_pid = pid;
  }
  return &process_set;
}
