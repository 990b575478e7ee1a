/* recio's guard of its file maps: a page of a guarded map that faults (SIGBUS: the file was
 * truncated under the map, or the disk gave an I/O error) is replaced by a page of zeros and its
 * offset remembered, instead of the fault killing the process (NOTE [map guard] in
 * recio/storage/mapped.py). The readers ask for that offset after reading (map_fault) and report
 * every record at or past it as truncated; the zeros read there are never delivered as data.
 *
 * The table of guarded maps is written under the GIL only; the handler (any thread, any time)
 * reads it with atomic loads and makes system calls only (no Python, no allocation).
 *
 * NOTE [handler chain]: the handler composes with the others a process installs (faulthandler,
 * torch's worker handler, ASan). A SIGBUS it does not take (a fault outside every guarded map,
 * or one sent by kill()) goes to the action it replaced, as if recio had installed nothing.
 * Where another handler took SIGBUS since, keep_in_front installs recio's again, in front of
 * it, through a fresh entry point: each install is a link with an entry point and a previous
 * action of its own. A handler installed over recio's records that link as its previous, and
 * gives the signal back to it (faulthandler restores it and raises) or puts it back when it is
 * removed (faulthandler.disable()): that link hands on to what it replaced, never to the
 * handler in front of it, so the chain is a list, never a cycle. Past the last link the last
 * one is used again; then a signal that comes back to a link while it hands it on (or a fault
 * that its previous action returned from without curing) takes the default action.
 */
#include "bind.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GUARD_SLOTS 4096
#define CHAIN_LINKS 32

typedef struct {
  _Atomic uintptr_t start; /* 0: the slot is free */
  _Atomic uintptr_t end;
  _Atomic int64_t fault; /* the lowest offset of a faulted page, or -1 */
  long long token;       /* what guard_map gave for this use of the slot (under the GIL) */
} guard_slot;

/* One install of the handler (NOTE [handler chain]). */
typedef struct {
  struct sigaction previous; /* the action it replaced: set before its entry point is installed */
  _Atomic long passing;      /* the thread handing a signal on to previous, or 0 */
  _Atomic uintptr_t passed;  /* the address of the last fault handed on to previous */
} chain_link;

static guard_slot slots[GUARD_SLOTS];
static chain_link links[CHAIN_LINKS];
static int links_used; /* under the GIL */
static long long uses; /* guard_map calls: a token is uses * GUARD_SLOTS + slot */
static uintptr_t page_size;

/* Replace the page at addr in the guarded map of slot s by zeros, and remember its offset. */
static int patch_page(guard_slot *s, uintptr_t start, uintptr_t addr) {
  const uintptr_t page = addr & ~(page_size - 1);
  void *got =
      mmap((void *)page, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (got == MAP_FAILED) return -1;
  const int64_t offset = page > start ? (int64_t)(page - start) : 0;
  int64_t seen = atomic_load(&s->fault);
  while ((seen < 0 || offset < seen) && !atomic_compare_exchange_weak(&s->fault, &seen, offset)) {
  }
  return 0;
}

/* Whether the kernel raised this SIGBUS for an access (which runs again once the handler
 * returns), rather than kill(), raise() or an asynchronous memory error report. */
static int is_access_fault(const siginfo_t *info) {
  return info->si_code > 0 && info->si_code != BUS_MCEERR_AO;
}

/* Patch the page under a fault in a guarded map; 0 where the fault is not in one. */
static int take_if_guarded(const siginfo_t *info) {
  const uintptr_t addr = (uintptr_t)info->si_addr;
  for (int i = 0; i < GUARD_SLOTS; i++) {
    guard_slot *s = &slots[i];
    const uintptr_t start = atomic_load(&s->start);
    if (start && start <= addr && addr < atomic_load(&s->end)) {
      return patch_page(s, start, addr) == 0;
    }
  }
  return 0;
}

/* SIGBUS's default action: the process ends (a fault runs again into it; a sent signal is
 * raised again, unblocked). */
static void take_default(int sig, const siginfo_t *info) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (is_access_fault(info)) return;
  sigset_t bus;
  sigemptyset(&bus);
  sigaddset(&bus, sig);
  pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
  raise(sig);
}

/* What act does with the signal, as if it were installed alone. */
static void take(const struct sigaction *act, int sig, siginfo_t *info, void *context) {
  if (act->sa_handler == SIG_IGN) {
    if (!is_access_fault(info)) return; /* ignored; a fault the kernel ends the process for */
  } else if (act->sa_handler != SIG_DFL) {
    if (act->sa_flags & SA_SIGINFO) {
      act->sa_sigaction(sig, info, context);
    } else {
      act->sa_handler(sig);
    }
    return;
  }
  take_default(sig, info);
}

static void on_sigbus(chain_link *link, int sig, siginfo_t *info, void *context) {
  const int fault = is_access_fault(info);
  if (fault && take_if_guarded(info)) return; /* the access runs again, on zeros */
  const long thread = (long)syscall(SYS_gettid);
  const uintptr_t addr = (uintptr_t)info->si_addr;
  if (atomic_load(&link->passing) == thread || (fault && atomic_load(&link->passed) == addr)) {
    take_default(sig, info); /* back round to this link, or not cured where it went */
    return;
  }
  if (fault) atomic_store(&link->passed, addr);
  const long outer = atomic_exchange(&link->passing, thread);
  take(&link->previous, sig, info, context);
  atomic_store(&link->passing, outer);
}

/* The entry points, one per link. */
#define ENTRY(n)                                                       \
  static void on_sigbus_##n(int sig, siginfo_t *info, void *context) { \
    on_sigbus(&links[n], sig, info, context);                          \
  }
ENTRY(0)
ENTRY(1)
ENTRY(2)
ENTRY(3)
ENTRY(4)
ENTRY(5)
ENTRY(6)
ENTRY(7)
ENTRY(8)
ENTRY(9)
ENTRY(10)
ENTRY(11)
ENTRY(12)
ENTRY(13)
ENTRY(14)
ENTRY(15)
ENTRY(16)
ENTRY(17)
ENTRY(18)
ENTRY(19)
ENTRY(20)
ENTRY(21)
ENTRY(22)
ENTRY(23)
ENTRY(24)
ENTRY(25)
ENTRY(26)
ENTRY(27)
ENTRY(28)
ENTRY(29)
ENTRY(30)
ENTRY(31)

typedef void (*entry_point)(int, siginfo_t *, void *);
static const entry_point entries[CHAIN_LINKS] = {
    on_sigbus_0,  on_sigbus_1,  on_sigbus_2,  on_sigbus_3,  on_sigbus_4,  on_sigbus_5,
    on_sigbus_6,  on_sigbus_7,  on_sigbus_8,  on_sigbus_9,  on_sigbus_10, on_sigbus_11,
    on_sigbus_12, on_sigbus_13, on_sigbus_14, on_sigbus_15, on_sigbus_16, on_sigbus_17,
    on_sigbus_18, on_sigbus_19, on_sigbus_20, on_sigbus_21, on_sigbus_22, on_sigbus_23,
    on_sigbus_24, on_sigbus_25, on_sigbus_26, on_sigbus_27, on_sigbus_28, on_sigbus_29,
    on_sigbus_30, on_sigbus_31,
};

/* Whether act is one of the installed links' entry points. */
static int is_recios(const struct sigaction *act) {
  if (!(act->sa_flags & SA_SIGINFO)) return 0;
  for (int i = 0; i < links_used; i++) {
    if (act->sa_sigaction == entries[i]) return 1;
  }
  return 0;
}

/* Install the handler, through a fresh link, unless one of its links takes SIGBUS now
 * (NOTE [handler chain]). */
static int keep_in_front(void) {
  struct sigaction now;
  if (sigaction(SIGBUS, NULL, &now) < 0) return -1;
  if (is_recios(&now)) return 0;
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  const int n = links_used < CHAIN_LINKS ? links_used : CHAIN_LINKS - 1;
  chain_link *link = &links[n];
  link->previous = now;
  atomic_store(&link->passing, 0);
  atomic_store(&link->passed, 0);
  struct sigaction mine;
  memset(&mine, 0, sizeof mine);
  mine.sa_sigaction = entries[n];
  /* SA_NODEFER: a handler this one hands on to that raises SIGBUS again (faulthandler) has it
   * delivered at once, while the link is still handing on. */
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&mine.sa_mask);
  struct sigaction swapped;
  if (sigaction(SIGBUS, &mine, &swapped) < 0) return -1;
  if (memcmp(&swapped, &now, sizeof now) != 0) link->previous = swapped; /* changed meanwhile */
  if (n == links_used) links_used++;
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

PyDoc_STRVAR(keep_guard_doc,
             "keep_guard(): install the guard's SIGBUS handler again, in front, where another "
             "handler took SIGBUS since (a reader calls it before it reads a guarded map). "
             "Raises OSError where it cannot be installed.");

static PyObject *keep_guard(PyObject *mod, PyObject *unused) {
  if (keep_in_front() < 0) return PyErr_SetFromErrno(PyExc_OSError);
  Py_RETURN_NONE;
}

static PyObject *guard_map(PyObject *mod, PyObject *obj) {
  uintptr_t start, end;
  if (address_range(obj, &start, &end) < 0) return NULL;
  if (start == end) return PyLong_FromLong(-1);
  if (keep_in_front() < 0) return PyErr_SetFromErrno(PyExc_OSError);
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
    {"keep_guard", keep_guard, METH_NOARGS, keep_guard_doc},
    {"unguard_map", unguard_map, METH_O, unguard_map_doc},
    {"map_fault", map_fault, METH_O, map_fault_doc},
    {NULL, NULL, 0, NULL},
};
