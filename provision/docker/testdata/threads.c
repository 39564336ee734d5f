// threads.c: starts one thread with pthread_create (glibc tries clone3
// first) and says so; TestGVisorSandboxStartsThreads runs it, static, in a
// gvisor Sandbox.
#include <pthread.h>
#include <stdio.h>
static void *f(void *a) { return a; }
int main(void) {
	pthread_t t;
	int err = pthread_create(&t, NULL, f, NULL);
	if (err) { printf("pthread_create: %d\n", err); return 1; }
	pthread_join(t, NULL);
	puts("threads started");
	return 0;
}
