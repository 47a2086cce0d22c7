"""A command stopped at a chosen point of its work, for tests that signal or
kill it there with no timer racing it: :data:`HOOKS` is Python source to put
at the top of a script run with ``python -c``; its ``stop_after(owner, name,
calls)`` and ``stop_before(owner, name)`` wrap ``owner.name`` so that at that
point the process prints "stopped" and waits for a line on stdin."""

HOOKS = """
import signal
import sys
import threading

def stop():
    if threading.current_thread() is not threading.main_thread():
        # The test's signal must reach the main thread, where Python runs its
        # handlers: the kernel may give a process's signal to any thread that
        # does not block it, and one given to this thread, waiting on stdin,
        # would leave the main thread waiting on it in turn (the test hung).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    print("stopped", flush=True)
    sys.stdin.readline()  # until signalled

def stop_after(owner, name, calls):
    original, made = getattr(owner, name), [0]
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        made[0] += 1
        if made[0] == calls:
            stop()
        return result
    setattr(owner, name, wrapper)

def stop_before(owner, name):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        stop()
        return original(*args, **kwargs)
    setattr(owner, name, wrapper)
"""
