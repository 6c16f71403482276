/*
 * engine-remote.h: what the engines on storage behind a network (NBD,
 * RBD) share: the memory of their failed opens.
 */
#ifndef XBD_BACK_ENGINE_REMOTE_H
#define XBD_BACK_ENGINE_REMOTE_H

/*
 * Failed opens of storage behind a network (NBD, RBD), remembered per
 * target: xenstore events retry an open as often as the toolstack writes
 * the device's nodes, and each try would be a connect (up to
 * nbd-connect-timeout-ms, or librados' client_mount_timeout, in the main
 * thread) and a log line.  recent returns the error of a failure of
 * target less than ms ago (the engine then fails at once, silently), or 0.
 */
int xbd_open_failure_recent(const char *target, unsigned int ms);
void xbd_open_failure_note(const char *target, int err);
/*
 * The level of the line about an open of target that failed with err:
 * XBD_LOG_DEBUG when its last noted failure was the same (the control
 * plane tries a failed open again with backoff: one line per change of
 * outcome, not one per try), else XBD_LOG_ERR.
 */
int xbd_open_failure_level(const char *target, int err);

#endif /* XBD_BACK_ENGINE_REMOTE_H */
