
ò/device:GPU:4611686018427387904öStream #7(Kernel)Ë")¿Ñ=Äµ"*loop_fusion.1" *" d")ÄâzÄµ"*loop_fusion.1" *" e"*¿ç∑Äµ"*loop_fusion.1" *" f"loop_fusion_kernel*correlation_id*
program_id*
hlo_op
	/host:CPU"corpus