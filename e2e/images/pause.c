/*
 * The pod sandbox's init process: holds the pod's namespaces open, reaps
 * orphaned children (it is PID 1 of the pod when namespaces are shared) and
 * exits cleanly on SIGTERM/SIGINT. Built static and packed FROM scratch by
 * e2e/cluster.sh as registry.k8s.io/pause:3.10, so the kubelet never pulls.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static int on(int sig, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    return sigaction(sig, &action, NULL);
}

int main(void) {
    if (on(SIGTERM, stop, 0) || on(SIGINT, stop, 0) || on(SIGCHLD, reap, SA_NOCLDSTOP | SA_RESTART)) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
