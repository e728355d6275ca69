// Clang thread-safety annotations (-Wthread-safety), as leveldb's
// port/thread_annotations.h. They document which lock guards which member and
// let clang check it at compile time; other compilers ignore them.
//
//   class Queue {
//     Mutex mu_;
//     std::deque<Task> tasks_ GUARDED_BY(mu_);
//     void PushLocked(Task t) REQUIRES(mu_);
//     void Push(Task t) EXCLUDES(mu_);
//   };
//
// Used by cache/ and vol/ (vol -> cache is an allowed dependency); scheduler/
// must not include it. Build a clang tree with -Wthread-safety to check
// (cache/README.md, "Thread-safety analysis").
#ifndef PRESCIENT_CACHE_BASE_THREAD_ANNOTATIONS_H_
#define PRESCIENT_CACHE_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define PRESCIENT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PRESCIENT_THREAD_ANNOTATION(x)
#endif

#ifndef CAPABILITY
#define CAPABILITY(x) PRESCIENT_THREAD_ANNOTATION(capability(x))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY PRESCIENT_THREAD_ANNOTATION(scoped_lockable)
#endif
#ifndef GUARDED_BY
#define GUARDED_BY(x) PRESCIENT_THREAD_ANNOTATION(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) PRESCIENT_THREAD_ANNOTATION(pt_guarded_by(x))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) PRESCIENT_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) PRESCIENT_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#endif
#ifndef REQUIRES
#define REQUIRES(...) PRESCIENT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) PRESCIENT_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE
#define ACQUIRE(...) PRESCIENT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) PRESCIENT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) PRESCIENT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef EXCLUDES
#define EXCLUDES(...) PRESCIENT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) PRESCIENT_THREAD_ANNOTATION(assert_capability(x))
#endif
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) PRESCIENT_THREAD_ANNOTATION(lock_returned(x))
#endif
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS PRESCIENT_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif

#endif  // PRESCIENT_CACHE_BASE_THREAD_ANNOTATIONS_H_
