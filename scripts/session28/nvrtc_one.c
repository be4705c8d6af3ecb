// NVRTC probe (session 28): compiles one CUDA source for sm_90a R times (env R, default 3) and prints
// each wall time; ARCH replaces the architecture option, X1 and X2 add options (e.g.
// --fdevice-time-trace=FILE). Build: gcc -O2 nvrtc_one.c -o nvrtc_one -ldl
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dlfcn.h>
typedef int (*create_t)(void**, const char*, const char*, int, const char**, const char**);
typedef int (*compile_t)(void*, int, const char**);
typedef int (*destroy_t)(void**);
typedef int (*logsz_t)(void*, size_t*);
typedef int (*log_t)(void*, char*);
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  void*h=dlopen("libnvrtc.so.13",RTLD_NOW); if(!h){printf("%s\n",dlerror());return 1;}
  create_t c=(create_t)dlsym(h,"nvrtcCreateProgram"); compile_t k=(compile_t)dlsym(h,"nvrtcCompileProgram"); destroy_t d=(destroy_t)dlsym(h,"nvrtcDestroyProgram");
  logsz_t ls=(logsz_t)dlsym(h,"nvrtcGetProgramLogSize"); log_t lg=(log_t)dlsym(h,"nvrtcGetProgramLog");
  FILE*f=fopen(argv[1],"rb"); fseek(f,0,2); long n=ftell(f); rewind(f); char*src=malloc(n+1); fread(src,1,n,f); src[n]=0;
  const char* inc=getenv("INC"); char incopt[1024]; snprintf(incopt,sizeof incopt,"--include-path=%s",inc);
  const char* arch=getenv("ARCH")?getenv("ARCH"):"--gpu-architecture=sm_90a"; const char* opts[]={arch,"-std=c++17","-default-device",incopt,getenv("X1")?getenv("X1"):"-default-device",getenv("X2")?getenv("X2"):"-default-device"};
  int R=getenv("R")?atoi(getenv("R")):3; for(int r=0;r<R;r++){ void*p; c(&p,src,"k.cu",0,0,0); double t=now(); int e=k(p,6,opts); double dt=now()-t;
    if(e){size_t s;ls(p,&s);char*b=malloc(s);lg(p,b);printf("err %d %s\n",e,b);} printf("%s rep %d: %.3f s\n",argv[1],r,dt); d(&p);}
}
