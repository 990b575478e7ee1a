/* recio's guard of its file maps: a page of a guarded map that faults (SIGBUS: the file was
 * truncated under the map, or the disk gave an I/O error) is replaced by a page of zeros and its
 * offset remembered, instead of the fault killing the process (NOTE [map guard] in
 * recio/storage/mapped.py). The readers ask for that offset after reading (map_fault) and report
 * every record at or past it as truncated; the zeros read there are never delivered as data.
 *
 * The table of guarded maps is written under the GIL only; the handler (any thread, any time)
 * reads it with atomic loads. A fault outside every guarded map goes to the handler that was
 * installed before, or ends the process as it would have without this one.
 */
#include "bind.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARD_SLOTS 4096

typedef struct {
  _Atomic uintptr_t start; /* 0: the slot is free */
  _Atomic uintptr_t end;
  _Atomic int64_t fault; /* the lowest offset of a faulted page, or -1 */
  long long token;        /* what guard_map gave for this use of the slot (under the GIL) */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static struct sigaction previous;
static int installed;
static long long uses; /* guard_map calls: a token is uses * GUARD_SLOTS + slot */
static uintptr_t page_size;

/* Replace the page at addr in the guarded map of slot s by zeros, and remember its offset. */
static int patch_page(guard_slot *s, uintptr_t start, uintptr_t addr) {
  const uintptr_t page = addr & ~(page_size - 1);
  void *got = mmap((void *)page, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                   -1, 0);
  if (got == MAP_FAILED) return -1;
  const int64_t offset = page > start ? (int64_t)(page - start) : 0;
  int64_t seen = atomic_load(&s->fault);
  while ((seen < 0 || offset < seen) &&
         !atomic_compare_exchange_weak(&s->fault, &seen, offset)) {
  }
  return 0;
}

static void on_sigbus(int sig, siginfo_t *info, void *context) {
  const uintptr_t addr = (uintptr_t)info->si_addr;
  if (info->si_code > 0) { /* raised by the kernel for an access, not by kill() or raise() */
    for (int i = 0; i < GUARD_SLOTS; i++) {
      guard_slot *s = &slots[i];
      const uintptr_t start = atomic_load(&s->start);
      if (start && start <= addr && addr < atomic_load(&s->end)) {
        if (patch_page(s, start, addr) == 0) return; /* the access runs again, on zeros */
        break;
      }
    }
  }
  /* Not ours: the handler before this one, or the default action (the access faults again). */
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) {
      previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  sigaction(SIGBUS, &previous, NULL);
}

/* Install the handler, or again where another one (faulthandler) took SIGBUS since. */
static int install(void) {
  struct sigaction now;
  if (sigaction(SIGBUS, NULL, &now) < 0) return -1;
  if (installed && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus) return 0;
  struct sigaction mine;
  memset(&mine, 0, sizeof mine);
  mine.sa_sigaction = on_sigbus;
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&mine.sa_mask);
  if (sigaction(SIGBUS, &mine, &now) < 0) return -1;
  previous = now;
  installed = 1;
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  return 0;
}

static int address_range(PyObject *obj, uintptr_t *start, uintptr_t *end) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return -1;
  *start = (uintptr_t)view.buf;
  *end = *start + (uintptr_t)view.len;
  PyBuffer_Release(&view);
  return 0;
}

PyDoc_STRVAR(guard_map_doc,
             "guard_map(buffer) -> token: guard the file map under buffer (an mmap), as a whole: "
             "a page of it that faults reads as zeros from then on, and map_fault(token) gives "
             "its offset. Any earlier guard of the same addresses is dropped (that map is gone). "
             "-1 where every slot is taken (the map is not guarded). Raises OSError where the "
             "handler cannot be installed.");

static PyObject *guard_map(PyObject *mod, PyObject *obj) {
  uintptr_t start, end;
  if (address_range(obj, &start, &end) < 0) return NULL;
  if (start == end) return PyLong_FromLong(-1);
  if (install() < 0) return PyErr_SetFromErrno(PyExc_OSError);
  int free_slot = -1;
  for (int i = 0; i < GUARD_SLOTS; i++) {
    guard_slot *s = &slots[i];
    const uintptr_t a = atomic_load(&s->start), b = atomic_load(&s->end);
    if (a && a < end && start < b) atomic_store(&s->start, 0); /* a map gone: these addresses */
    if (!atomic_load(&s->start) && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) return PyLong_FromLong(-1);
  guard_slot *s = &slots[free_slot];
  s->token = ++uses * GUARD_SLOTS + free_slot;
  atomic_store(&s->fault, -1);
  atomic_store(&s->end, end);
  atomic_store(&s->start, start); /* last: the handler uses a slot once its start is set */
  return PyLong_FromLongLong(s->token);
}

/* The slot of token while it is that token's, else NULL; -1 with an exception for a non-int. */
static int slot_of(PyObject *obj, guard_slot **s) {
  const long long token = PyLong_AsLongLong(obj);
  if (token == -1 && PyErr_Occurred()) return -1;
  *s = NULL;
  if (token >= 0) {
    guard_slot *t = &slots[token % GUARD_SLOTS];
    if (t->token == token && atomic_load(&t->start)) *s = t;
  }
  return 0;
}

PyDoc_STRVAR(unguard_map_doc,
             "unguard_map(token): drop the guard guard_map gave (nothing where it is gone).");

static PyObject *unguard_map(PyObject *mod, PyObject *obj) {
  guard_slot *s;
  if (slot_of(obj, &s) < 0) return NULL;
  if (s) atomic_store(&s->start, 0);
  Py_RETURN_NONE;
}

PyDoc_STRVAR(map_fault_doc,
             "map_fault(token) -> the offset of the lowest page of the guarded map that has "
             "faulted (it and what follows may read as zeros), or -1.");

static PyObject *map_fault(PyObject *mod, PyObject *obj) {
  guard_slot *s;
  if (slot_of(obj, &s) < 0) return NULL;
  return PyLong_FromLongLong(s ? (long long)atomic_load(&s->fault) : -1);
}

PyMethodDef rc_guard_functions[] = {
    {"guard_map", guard_map, METH_O, guard_map_doc},
    {"unguard_map", unguard_map, METH_O, unguard_map_doc},
    {"map_fault", map_fault, METH_O, map_fault_doc},
    {NULL, NULL, 0, NULL},
};
