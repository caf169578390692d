/* verify_mlc.h */
#ifndef TPL_VERIFY_MLC_H
#define TPL_VERIFY_MLC_H
#endif
