/* memtrack base: version and error codes shared by every module.
 *
 * Every function in memtrack that can fail returns 0 (or a count) on success
 * and a negative errno-style code on failure: either a plain negated errno
 * value (-ENOMEM, -EINVAL, -EFAULT, ...) or one of the MT_E* codes below,
 * which live above the errno range. mt_strerror() turns any of them into
 * text. */
#ifndef MEMTRACK_BASE_H
#define MEMTRACK_BASE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The one place the version is written: CMake reads these four lines (and
 * fails the configure when the string disagrees with the numbers). */
#define MT_VERSION_MAJOR 0
#define MT_VERSION_MINOR 1
#define MT_VERSION_PATCH 0
#define MT_VERSION_STRING "0.1.0"
/* Encoded as MAJOR*10000 + MINOR*100 + PATCH, comparable with <, >. */
#define MT_VERSION (MT_VERSION_MAJOR * 10000 + MT_VERSION_MINOR * 100 + MT_VERSION_PATCH)

#if defined(_WIN32)
#define MT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define MT_API __attribute__((visibility("default")))
#else
#define MT_API
#endif

/* memtrack's own error codes. They are negative, start at -4096 so they never
 * collide with a negated errno value, and never change meaning once released. */
enum mt_error {
    MT_OK = 0,
    MT_ECORRUPT = -4096,   /* input data failed validation (bad magic, lengths, offsets) */
    MT_ECHECKSUM = -4097,  /* a checksum did not match the data it covers */
    MT_ETRUNCATED = -4098, /* input ended in the middle of a unit */
    MT_EVERSION = -4099,   /* input written by an unsupported format version */
    MT_EDEVLOST = -4100,   /* the (real or simulated) device was lost */
    MT_EDEGRADED = -4101,  /* the operation worked, but with reduced precision */
    MT_EUNSUPPORTED = -4102, /* the platform or kernel cannot do this */
    MT_ECANCELED = -4103,  /* a wait was cancelled by another thread */
    MT_ETIMEDOUT = -4104,  /* a wait reached its deadline */
    MT_EUNMAPPED = -4105,  /* the application unmapped or moved (part of) the memory */
    /* coherence */
    MT_ENOBUF = -4106,    /* buffer handle freed, never valid, or another client's */
    MT_EDEVMEM = -4107,   /* device memory full, even after evicting what is valid elsewhere */
    MT_ELOSTDATA = -4108, /* the range's only valid copy was lost with its device */
    MT_EMAPPED = -4109,   /* the range is mapped for the host */
    /* check */
    MT_ECHECK_NOACCESS = -4110, /* a byte of the range is not addressable */
    MT_ECHECK_UNINIT = -4111,   /* addressable, but a byte was never initialised */
    MT_ECHECK_PTX = -4112,      /* PTX text the instrumenter cannot parse */
    /* coherence */
    MT_EFORKED = -4113, /* the object belongs to the process this one was forked from */
    MT_ERROR_LAST = -4113  /* the most negative code: own codes are dense, -4096 down to here */
};

/* Returns the library's run-time version as MAJOR*10000 + MINOR*100 + PATCH.
 * Compare with MT_VERSION to detect a header/library mismatch. Any thread. */
MT_API int mt_version(void);

/* Returns the run-time version as a static string "MAJOR.MINOR.PATCH". Any thread. */
MT_API const char *mt_version_string(void);

/* Returns a static, human-readable description of `code`: 0, a negated errno
 * value or an MT_E* code. Never NULL; unknown codes give "unknown error".
 * Any thread; the returned string is never modified. */
MT_API const char *mt_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
