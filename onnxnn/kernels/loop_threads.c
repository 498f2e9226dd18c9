/* The layer loops' threads (convolution_loops.h), which the optimizer updates share too (the end of this
 * file): one pool of workers, started on first use and parked on a condition variable between calls,
 * that share a call's pieces with the calling thread.
 *
 * The loops used to start a thread per share with pthread_create and join it at the end of each call,
 * and each thread ran one fixed share. On two cores that are also running onnxruntime's threads and the
 * weight gradients beside the sessions (runtime/split_sessions.py), a share's thread often waited a
 * scheduler slice before it ran, and the call waited with it: a small ResNet's normalization took 1-2.5
 * ms on two threads against 0.25 on one. Here a call is cut into pieces (a normalization's channels,
 * ranges of a ReLU's elements, a weight gradient's ranges of samples) that the caller and the woken
 * workers take one at a time from a shared counter: a worker that is late takes fewer pieces, none at
 * all when the caller has taken the last one first, and the call never waits for more than the piece a
 * worker is running.
 *
 * Which thread runs a piece changes nothing in its arithmetic: each piece writes its own results (its
 * channels, its elements, its own sums), the same bits on any thread, as long as the threads round
 * alike: a worker takes the caller's floating-point control (flush-to-zero, rounding) for each call it
 * joins (onnxnn.set_flush_denormal sets the calling thread's).
 *
 * A forked child has none of the pool's workers: a handler registered with pthread_atfork empties the
 * pool in the child, which starts its own workers on first use. Two calls at once (the weight
 * gradients' thread beside the sessions, other Python threads) do not share the pool: the second runs
 * all its pieces on its own thread.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "convolution_loops.h"

/* The calling thread's floating-point control (float_modes.c sets its subnormal handling), which a
 * worker takes for each call it joins: MXCSR on x86, FPCR on AArch64. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>
static inline unsigned long float_control(void) { return _mm_getcsr(); }
static inline void set_float_control(unsigned long control) { _mm_setcsr((unsigned int)control); }
#elif defined(__GNUC__) && defined(__aarch64__)
static inline unsigned long float_control(void)
{
    unsigned long control;
    __asm__ volatile("mrs %0, fpcr" : "=r"(control));
    return control;
}
static inline void set_float_control(unsigned long control) { __asm__ volatile("msr fpcr, %0" : : "r"(control)); }
#else
static inline unsigned long float_control(void) { return 0; }
static inline void set_float_control(unsigned long control) { (void)control; }
#endif

int64_t thread_count(int threads, int64_t parts, int64_t products)
{
    int64_t count = threads < 1 ? 1 : threads > MOST_THREADS ? MOST_THREADS : threads;
    if (count > parts) count = parts > 0 ? parts : 1;
    if (count > products / THREAD_MIN_PRODUCTS) count = products / THREAD_MIN_PRODUCTS > 0 ? products / THREAD_MIN_PRODUCTS : 1;
    return count;
}

/* One call's pieces, on the calling thread's stack: workers read it only between joining the call and
 * leaving it, and the caller returns only once every worker that joined has left. */
typedef struct {
    void *(*run)(void *);
    char *shares;
    size_t share_size;
    int64_t count;
    atomic_int_fast64_t next; /* the next piece not yet taken */
    unsigned long control;    /* the caller's floating-point control */
} Call;

/* The pool. ``lock`` guards every field but the call's counter. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;  /* workers wait here for a call */
    pthread_cond_t ended; /* the caller waits here for the workers to leave its call */
    Call *call;           /* the call open to workers, or NULL */
    uint64_t calls;       /* calls opened so far: a worker joins each at most once */
    int workers;          /* started */
    int wanted;           /* workers the open call still takes */
    int inside;           /* workers inside a call, which its caller waits for */
} Pool;

#define EMPTY_POOL {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0}

static Pool pool = EMPTY_POOL;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

/* In a forked child: none of the workers exist there, and no call is running but the forking thread's
 * (none: fork is not called from inside a loop). */
static void empty_pool_in_child(void)
{
    const Pool empty = EMPTY_POOL;
    pool = empty;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, empty_pool_in_child); }

/* Takes the call's pieces one at a time until none is left. */
static void take_pieces(Call *call)
{
    for (;;) {
        const int64_t piece = atomic_fetch_add_explicit(&call->next, 1, memory_order_relaxed);
        if (piece >= call->count) return;
        call->run(call->shares + piece * call->share_size);
    }
}

static void *worker(void *unused)
{
    (void)unused;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.calls == seen || pool.call == NULL || pool.wanted == 0) {
            seen = pool.calls;
            pthread_cond_wait(&pool.wake, &pool.lock);
        }
        seen = pool.calls;
        Call *call = pool.call;
        pool.wanted--, pool.inside++;
        pthread_mutex_unlock(&pool.lock);
        set_float_control(call->control);
        take_pieces(call);
        pthread_mutex_lock(&pool.lock);
        if (--pool.inside == 0) pthread_cond_broadcast(&pool.ended);
    }
    return NULL;
}

/* Starts workers until there are ``count`` (under the lock); fewer where the system refuses one. They
 * block every signal: Python's handlers run on its main thread. */
static void start_workers(int count)
{
    pthread_attr_t attributes;
    sigset_t all, previous;
    if (pthread_attr_init(&attributes) != 0) return;
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    while (pool.workers < count) {
        pthread_t thread;
        if (pthread_create(&thread, &attributes, worker, NULL) != 0) break;
        pool.workers++;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    pthread_attr_destroy(&attributes);
}

void run_shares(void *(*run)(void *), void *shares, size_t share_size, int64_t count, int64_t threads)
{
    Call call = {run, shares, share_size, count, 0, 0};
    if (threads > MOST_THREADS) threads = MOST_THREADS;
    if (threads > count) threads = count;
    int helpers = 0;
    if (threads > 1) {
        pthread_once(&fork_handler_once, register_fork_handler);
        call.control = float_control();
        pthread_mutex_lock(&pool.lock);
        if (pool.call == NULL && pool.inside == 0) {  /* else another call has the pool: this one runs alone */
            if (pool.workers < threads - 1) start_workers((int)threads - 1);
            helpers = pool.workers < threads - 1 ? pool.workers : (int)threads - 1;
            if (helpers > 0) pool.call = &call, pool.calls++, pool.wanted = helpers;
        }
        pthread_mutex_unlock(&pool.lock);
        /* After unlocking: a woken worker does not wait for the lock first. */
        if (helpers == 1) pthread_cond_signal(&pool.wake);
        else if (helpers > 1) pthread_cond_broadcast(&pool.wake);
    }
    take_pieces(&call);
    if (helpers == 0) return;
    pthread_mutex_lock(&pool.lock);
    pool.call = NULL, pool.wanted = 0;  /* no worker joins any more */
    while (pool.inside > 0) pthread_cond_wait(&pool.ended, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

/* The optimizer updates (update_loops.c, compiled_updates.py) share the same workers. That library is
 * built without threads (and for MSVC too), so its shares come here: each is one call of an update
 * function on a range of the update's elements, as compiled_updates.py cut them. */
#define LOOP_THREADS_VERSION 1
EXPORTED int onnxnn_loop_threads_version(void) { return LOOP_THREADS_VERSION; }

/* An update function of update_loops.c (its UPDATE_PARAMETERS): the tensors, their element counts,
 * their arrays, the factors (float or double, as the function's dtype) and the option bits. */
typedef void (*UpdateLoop)(size_t tensors, const size_t *counts, void *const *arrays, const void *factors, int options);

typedef struct {
    UpdateLoop update;
    size_t tensors;
    const size_t *counts;
    void *const *arrays;
    const void *factors;
    int options;
} UpdateShare;

static void *run_update_share(void *share)
{
    const UpdateShare *update = share;
    update->update(update->tensors, update->counts, update->arrays, update->factors, update->options);
    return NULL;
}

EXPORTED void onnxnn_run_update_shares(UpdateShare *shares, int64_t count, int64_t threads)
{
    run_shares(run_update_share, shares, sizeof(UpdateShare), count, threads);
}
