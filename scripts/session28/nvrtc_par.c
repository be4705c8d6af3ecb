// NVRTC scaling probe (session 28): compiles the given CUDA sources for sm_90a with T workers,
// either threads of this process ("thread") or forked processes ("proc"), jobs taken from a
// shared counter, and prints the wall time. Run with CUDA_CACHE_DISABLE=1 for truly cold
// compiles (NVRTC 13 otherwise answers repeats from the driver's cache).
// Build: gcc -O2 nvrtc_par.c -o nvrtc_par -ldl -lpthread
// Use:   INC=<cuda include dir> [JOBS=1] ./nvrtc_par thread|proc T file.cu...  (JOBS=1: each job's time)
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
typedef int (*create_t)(void**, const char*, const char*, int, const char**, const char**);
typedef int (*compile_t)(void*, int, const char**);
typedef int (*destroy_t)(void**);
static create_t c; static compile_t k; static destroy_t d;
static char** srcs; static char** names; static int n; static atomic_int* next; static char incopt[1024];
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void* worker(void* arg){
  const char* opts[]={"--gpu-architecture=sm_90a","-std=c++17","-default-device",incopt,"--ptxas-options=-v"};
  for(;;){ int i=atomic_fetch_add(next,1); if(i>=n) break; void*p; c(&p,srcs[i],"k.cu",0,0,0);
    double t0=now(); if(k(p,5,opts)) fprintf(stderr,"job %d failed\n",i); d(&p);
    if(getenv("JOBS")) printf("  job %d %s: %.3f s\n",i,names[i],now()-t0);} return 0;}
int main(int argc,char**argv){
  void*h=dlopen("libnvrtc.so.13",RTLD_NOW); if(!h){printf("%s\n",dlerror());return 1;}
  c=(create_t)dlsym(h,"nvrtcCreateProgram"); k=(compile_t)dlsym(h,"nvrtcCompileProgram"); d=(destroy_t)dlsym(h,"nvrtcDestroyProgram");
  snprintf(incopt,sizeof incopt,"--include-path=%s",getenv("INC"));
  int proc=!strcmp(argv[1],"proc"); int T=atoi(argv[2]); n=argc-3; srcs=malloc(n*sizeof(char*)); names=argv+3;
  for(int i=0;i<n;i++){FILE*f=fopen(argv[3+i],"rb"); fseek(f,0,2); long m=ftell(f); rewind(f); srcs[i]=malloc(m+1); fread(srcs[i],1,m,f); srcs[i][m]=0; fclose(f);}
  next=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); atomic_store(next,0);
  double t=now();
  if(proc){ for(int w=0;w<T;w++) if(fork()==0){worker(0); _exit(0);} while(wait(0)>0); }
  else { pthread_t th[256]; for(int w=0;w<T;w++) pthread_create(&th[w],0,worker,0); for(int w=0;w<T;w++) pthread_join(th[w],0); }
  printf("%s T=%d jobs=%d: %.3f s\n",argv[1],T,n,now()-t); return 0;}
